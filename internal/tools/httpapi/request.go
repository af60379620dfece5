package httpapi

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/toold/toold/internal/credentials"
	"github.com/toold/toold/internal/delegate"
	"github.com/toold/toold/internal/strictjson"
	"github.com/toold/toold/internal/tools"
)

// request is a compiled RequestConfig with its credential.
type request struct {
	method  string
	url     *urlTemplate
	query   []named
	headers []named
	body    *body
	cred    credential
}

type named struct {
	name  string
	value text
}

// credential is what Auth adds to every request.
type credential struct {
	header, headerValue string
	query, queryValue   string
	secrets             []string // every value to keep out of logs and results
	// A per-user credential is rendered for each call from the caller's
	// vault: headerTmpl into header (bearer: "Bearer " and the template),
	// queryTmpl into the query parameter query, or basic's two parts.
	headerTmpl, queryTmpl *credentials.Template
	basicUser, basicPass  *credentials.Template
	// delegated: an OAuth connection, token exchange or passthrough
	// (Client.conn) sets Authorization.
	delegated bool
}

// perUser reports a credential resolved for each call's principal.
func (c *credential) perUser() bool {
	return c.headerTmpl != nil || c.queryTmpl != nil || c.basicUser != nil || c.delegated
}

// Refs lists the vault credentials the tool's auth names (${user:name}).
func (c *credential) refs() []string {
	var out []string
	for _, t := range []*credentials.Template{c.headerTmpl, c.queryTmpl, c.basicUser, c.basicPass} {
		if t != nil {
			out = append(out, t.Refs()...)
		}
	}
	return out
}

// template parses a value that may name the caller's credentials; nil
// when it names none.
func template(field, v string) (*credentials.Template, error) {
	t, err := credentials.ParseTemplate(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	if !t.PerUser() {
		return nil, nil
	}
	return &t, nil
}

// built is one call's request, ready to send (again, on a retry).
type built struct {
	method string
	url    *url.URL
	target string // method, host and path, for messages: never the query
	header http.Header
	body   []byte
	// The caller's own credential, for a per-user tool: the values to
	// scrub from the answer, and the delegated credential sent (a 401
	// gets one more with a new one).
	secrets []string
	cred    *delegate.Credential
	retried bool
}

// methods an HTTP tool may use (the config's validation says the same).
var methods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// headers toold sets itself, or that would change where or how the
// request goes.
var reservedHeaders = []string{"Host", "Content-Length", "Transfer-Encoding", "Connection", "Upgrade", "Te",
	"Trailer", "Keep-Alive", "Proxy-Authorization", "Proxy-Connection"}

func compileRequest(rc RequestConfig, auth AuthConfig, format string) (*request, error) {
	r := &request{method: cmp.Or(rc.Method, http.MethodGet)}
	if !slices.Contains(methods, r.method) {
		return nil, fmt.Errorf("request.method: %q is not one of %s", r.method, strings.Join(methods, ", "))
	}
	if format != "json" && format != "text" {
		return nil, fmt.Errorf("response.format: %q is not json or text", format)
	}
	var err error
	if r.url, err = parseURL(rc.URL); err != nil {
		return nil, fmt.Errorf("request.url: %w", err)
	}
	if r.cred, err = compileAuth(auth); err != nil {
		return nil, err
	}
	for _, k := range slices.Sorted(maps.Keys(rc.Query)) {
		if k == r.cred.query {
			return nil, fmt.Errorf("request.query.%s: the credential's query parameter has that name", k)
		}
		t, err := parseText(rc.Query[k])
		if err != nil {
			return nil, fmt.Errorf("request.query.%s: %w", k, err)
		}
		r.query = append(r.query, named{k, t})
	}
	headers := map[string]string{"User-Agent": defaultUserAgent}
	if format == "json" {
		headers["Accept"] = "application/json"
	}
	if rc.Body != nil {
		headers["Content-Type"] = "application/json"
	}
	for k, v := range rc.Headers {
		headers[http.CanonicalHeaderKey(k)] = v
		if err := checkHeaderName(k, r.cred); err != nil {
			return nil, fmt.Errorf("request.headers.%s: %w", k, err)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(headers)) {
		t, err := parseText(headers[k])
		if err == nil && t.literal() && !httpguts.ValidHeaderFieldValue(headers[k]) {
			err = fmt.Errorf("%q holds a control character or a line break", headers[k])
		}
		if err != nil {
			return nil, fmt.Errorf("request.headers.%s: %w", k, err)
		}
		r.headers = append(r.headers, named{k, t})
	}
	if rc.Body != nil {
		if r.method == http.MethodGet || r.method == http.MethodHead {
			return nil, fmt.Errorf("request.body: a %s request has no body", r.method)
		}
		if ct := headers["Content-Type"]; !strings.Contains(strings.ToLower(ct), "json") {
			return nil, fmt.Errorf("request.body is sent as JSON, but request.headers.Content-Type says %q", ct)
		}
		if r.body, err = parseBody(rc.Body); err != nil {
			return nil, fmt.Errorf("request.body.%w", err)
		}
	}
	return r, nil
}

func checkHeaderName(k string, cred credential) error {
	switch {
	case !httpguts.ValidHeaderFieldName(k):
		return fmt.Errorf("%q is not a header name", k)
	case slices.Contains(reservedHeaders, http.CanonicalHeaderKey(k)):
		return fmt.Errorf("toold sets %s itself", http.CanonicalHeaderKey(k))
	case cred.header != "" && http.CanonicalHeaderKey(k) == cred.header:
		return fmt.Errorf("the credential (auth) sets %s", cred.header)
	}
	return nil
}

// compileAuth resolves the one credential form given. An empty value
// sends nothing: ${VAR:-} is how an operator makes a credential optional.
func compileAuth(a AuthConfig) (credential, error) {
	var c credential
	forms := 0
	var err error
	if a.Bearer != "" {
		forms++
		c.header = "Authorization"
		if c.headerTmpl, err = template("auth.bearer", "Bearer "+a.Bearer); err != nil {
			return c, err
		}
		if c.headerTmpl == nil {
			c.headerValue = "Bearer " + a.Bearer
			c.secrets = append(c.secrets, a.Bearer)
		}
	}
	if a.Header != nil {
		forms++
		if !httpguts.ValidHeaderFieldName(a.Header.Name) || slices.Contains(reservedHeaders, http.CanonicalHeaderKey(a.Header.Name)) {
			return c, fmt.Errorf("auth.header.name: %q cannot carry a credential", a.Header.Name)
		}
		if c.headerTmpl, err = template("auth.header.value", a.Header.Value); err != nil {
			return c, err
		}
		if c.headerTmpl != nil || a.Header.Value != "" {
			c.header = http.CanonicalHeaderKey(a.Header.Name)
		}
		if c.headerTmpl == nil && a.Header.Value != "" {
			c.headerValue = a.Header.Value
			c.secrets = append(c.secrets, a.Header.Value)
		}
	}
	if a.Query != nil {
		forms++
		if c.queryTmpl, err = template("auth.query.value", a.Query.Value); err != nil {
			return c, err
		}
		if c.queryTmpl != nil || a.Query.Value != "" {
			c.query = a.Query.Name
		}
		if c.queryTmpl == nil && a.Query.Value != "" {
			c.queryValue = a.Query.Value
			c.secrets = append(c.secrets, a.Query.Value)
		}
	}
	if a.Basic != nil {
		forms++
		if c.basicUser, err = template("auth.basic.username", a.Basic.Username); err != nil {
			return c, err
		}
		if c.basicPass, err = template("auth.basic.password", a.Basic.Password); err != nil {
			return c, err
		}
		switch {
		case c.basicUser != nil || c.basicPass != nil:
			if c.basicUser == nil {
				t, _ := credentials.ParseTemplate(a.Basic.Username)
				c.basicUser = &t
			}
			if c.basicPass == nil {
				t, _ := credentials.ParseTemplate(a.Basic.Password)
				c.basicPass = &t
			}
			c.header = "Authorization"
		case a.Basic.Password != "":
			enc := base64.StdEncoding.EncodeToString([]byte(a.Basic.Username + ":" + a.Basic.Password))
			c.header, c.headerValue = "Authorization", "Basic "+enc
			c.secrets = append(c.secrets, a.Basic.Password, enc)
		}
	}
	for _, on := range []bool{a.OAuth != nil, a.TokenExchange != nil, a.Passthrough} {
		if on {
			forms++
			c.header, c.delegated = "Authorization", true
		}
	}
	if forms > 1 {
		return c, fmt.Errorf("auth: give one of bearer, header, query, basic, oauth, token_exchange and passthrough")
	}
	if c.headerValue != "" && !httpguts.ValidHeaderFieldValue(c.headerValue) {
		return c, fmt.Errorf("auth: the credential holds a control character or a line break")
	}
	return c, nil
}

// build renders one call's request from its arguments. Nothing the
// declaration does not allow is sent: values are escaped into their place,
// headers with a line break or over the size caps are refused.
func (r *request) build(args map[string]any) (*built, error) {
	q := url.Values{}
	for _, p := range r.query {
		if err := addQuery(q, p, args); err != nil {
			return nil, err
		}
	}
	if r.cred.queryValue != "" {
		q.Set(r.cred.query, r.cred.queryValue)
	}
	u, err := r.url.render(args, q.Encode())
	if err != nil {
		return nil, err
	}
	b := &built{method: r.method, url: u, target: r.method + " " + u.Host + u.EscapedPath(), header: http.Header{}}
	size := 0
	for _, h := range r.headers {
		v, ok, err := h.value.render(args)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if err := headerValueOK(h, v); err != nil {
			return nil, err
		}
		size += len(h.name) + len(v)
		b.header.Set(h.name, v)
	}
	if size > maxHeaderBytes {
		return nil, tools.Errorf(tools.ValidationError, "the request's headers would be %d bytes, over the %d-byte cap", size, maxHeaderBytes).
			WithCode(tools.CodeHeaderTooLarge).WithSuggestion("send shorter values")
	}
	if r.cred.headerValue != "" {
		b.header.Set(r.cred.header, r.cred.headerValue)
	}
	if r.body != nil {
		v, _, err := r.body.render(args)
		if err == nil {
			b.body, err = json.Marshal(v)
		}
		if err != nil {
			return nil, tools.Errorf(tools.ValidationError, "the request body cannot be built: %v", err)
		}
	}
	return b, nil
}

func addQuery(q url.Values, p named, args map[string]any) error {
	if ph, whole := p.value.whole(); whole {
		if list, ok := args[ph.name].([]any); ok {
			for _, item := range list {
				s, err := scalar(ph.name, item)
				if err != nil {
					return err
				}
				q.Add(p.name, s)
			}
			return nil
		}
	}
	v, ok, err := p.value.render(args)
	if ok {
		q.Add(p.name, v)
	}
	return err
}

func headerValueOK(h named, v string) error {
	name := strings.Join(h.value.names(), ", ")
	if !httpguts.ValidHeaderFieldValue(v) {
		return argError(name, "would put a line break or a control character into the header %s", h.name)
	}
	if len(v) > maxHeaderValueBytes {
		return argError(name, "would make the header %s %d bytes long, over the %d-byte cap", h.name, len(v), maxHeaderValueBytes)
	}
	return nil
}

// redacted replaces a credential; the sanitizer's marker form.
const redacted = "[REDACTED:credential]"

// scrubber replaces the credential's values, raw and in the encodings an
// API may echo them in (URL query or path, JSON string), in whatever the
// API answers and in every message, before anything else reads it.
func scrubber(secrets []string) *strings.Replacer {
	var forms []string
	for _, s := range secrets {
		if len(s) < 4 { // too short to find without wrecking the text
			continue
		}
		quoted := string(strictjson.AppendString(nil, s))
		forms = append(forms, s, url.QueryEscape(s), url.PathEscape(s), quoted[1:len(quoted)-1])
	}
	if forms == nil {
		return nil
	}
	// Longest first: where two forms match at one place, the longer wins.
	slices.SortFunc(forms, func(a, b string) int {
		if d := len(b) - len(a); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	var pairs []string
	for _, f := range slices.Compact(forms) {
		pairs = append(pairs, f, redacted)
	}
	return strings.NewReplacer(pairs...)
}
