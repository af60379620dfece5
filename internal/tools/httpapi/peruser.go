package httpapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/credentials"
	"github.com/toold/toold/internal/delegate"
	"github.com/toold/toold/internal/netguard"
	"github.com/toold/toold/internal/tools"
)

// perUser wires a tool whose credential is the caller's own: a vault
// credential it names (${user:name}) needs the vault; an OAuth
// connection, a token exchange or a passthrough is registered with the
// delegation manager under the tool's name, its authorization server
// reached through the tool's own guard.
func (s *Set) perUser(c *Client, tc ToolConfig, guard *netguard.Guard) error {
	cred := &c.req.cred
	if refs := cred.refs(); len(refs) > 0 && s.opts.Vault == nil {
		return fmt.Errorf("auth: ${user:%s} names the caller's own credential, and toold has no credentials vault "+
			"(set credentials.key, and keep the state store on)", refs[0])
	}
	if !cred.delegated {
		return nil
	}
	if s.opts.Delegate == nil {
		return errors.New("auth: acting as the caller (oauth, token_exchange, passthrough) needs the credentials vault " +
			"(set credentials.key, and keep the state store on)")
	}
	conn, err := s.opts.Delegate.Add(delegate.Downstream{Name: tc.Name, URL: tc.Request.URL, OAuth: tc.Auth.OAuth,
		Exchange: tc.Auth.TokenExchange, Passthrough: tc.Auth.Passthrough, Client: guard.Client(), AllowHTTP: tc.AllowHTTP})
	if err != nil {
		return err
	}
	c.conn = conn
	return nil
}

// authorize puts the call's principal's own credential on the request,
// resolved now: their OAuth token (refreshed when due), an exchanged or
// passed-through token, or the vault credentials the tool names. The
// values go on the request and into the list scrubbed from the answer,
// nowhere else.
func (c *Client) authorize(ctx context.Context, b *built) error {
	who := auth.IdentityFrom(ctx)
	cr := c.req.cred
	if c.conn != nil {
		got, err := c.conn.Credential(ctx, who)
		if err != nil {
			return c.credentialError(err)
		}
		b.header.Set("Authorization", got.Header)
		b.cred, b.secrets = got, append(b.secrets, got.Token)
		return nil
	}
	vault := c.set.opts.Vault
	render := func(t *credentials.Template) (string, error) {
		v, err := t.Render(ctx, vault, who)
		if err != nil {
			return "", c.credentialError(err)
		}
		return v, nil
	}
	switch {
	case cr.basicUser != nil:
		u, err := render(cr.basicUser)
		if err != nil {
			return err
		}
		p, err := render(cr.basicPass)
		if err != nil {
			return err
		}
		enc := base64.StdEncoding.EncodeToString([]byte(u + ":" + p))
		b.header.Set("Authorization", "Basic "+enc)
		b.secrets = append(b.secrets, p, enc)
	case cr.headerTmpl != nil:
		v, err := render(cr.headerTmpl)
		if err != nil {
			return err
		}
		if !httpguts.ValidHeaderFieldValue(v) {
			return tools.NewUserError("the caller's credential for %s holds a line break or a control character", c.name).
				WithCode(tools.CodeCredentialRequired).WithSuggestion("set it again without them: PUT /credentials/%s", cr.headerTmpl.Refs()[0])
		}
		b.header.Set(cr.header, v)
		b.secrets = append(b.secrets, strings.TrimPrefix(v, "Bearer "))
	case cr.queryTmpl != nil:
		v, err := render(cr.queryTmpl)
		if err != nil {
			return err
		}
		u := *b.url
		q := u.Query()
		q.Set(cr.query, v)
		u.RawQuery = q.Encode()
		b.url = &u
		b.secrets = append(b.secrets, v)
	}
	return nil
}

// credentialError is what the caller is told when their credential
// cannot be had.
func (c *Client) credentialError(err error) error {
	if te := delegate.ToolError(err, c.name); te != nil {
		return te
	}
	return tools.Errorf(tools.SystemError, "the caller's credential for %s could not be read", c.name).Wrap(err)
}

// reauthorize handles a 401 to a delegated credential: the credential is
// refreshed (or exchanged again) once and the request sent once more
// (again true). A 401 or 403 to the caller's own credential that remains
// is the caller's to fix, not the operator's: the consent step again, or
// the credential to set anew.
func (c *Client) reauthorize(ctx context.Context, b *built, ans *answer, err error) (again bool, _ error) {
	if err != nil || ans == nil || !c.req.cred.perUser() || ans.status != http.StatusUnauthorized && ans.status != http.StatusForbidden {
		return false, nil
	}
	who := auth.IdentityFrom(ctx)
	if c.conn != nil && ans.status == http.StatusUnauthorized && !b.retried {
		b.retried = true
		next, rerr := c.conn.Rejected(ctx, who, b.cred, ans.header.Values("WWW-Authenticate"))
		if rerr != nil {
			return false, c.credentialError(rerr)
		}
		if next != nil {
			b.header = b.header.Clone()
			b.header.Set("Authorization", next.Header)
			b.cred, b.secrets = next, append(b.secrets, next.Token)
			return true, nil
		}
	}
	if rateLimited(ans.header) {
		return false, nil
	}
	if c.conn != nil && c.conn.IsOAuth() {
		return false, c.credentialError(c.conn.Required(who, fmt.Sprintf("%s refused the caller's token (%s)", b.target, statusText(ans.status))))
	}
	if refs := c.req.cred.refs(); len(refs) > 0 {
		te := tools.NewPermissionError("%s refused the caller's own credential %q: %s answered %s", c.name, refs[0], b.target, statusText(ans.status)).
			WithCode(tools.CodeCredentialRequired).WithSuggestion("set a valid one with PUT /credentials/%s, then call again", refs[0])
		te.Upstream, te.Credential = c.name, refs[0]
		return false, te
	}
	return false, tools.NewPermissionError("%s refused the caller's token: %s answered %s", c.name, b.target, statusText(ans.status)).
		WithCode(tools.CodeDelegationRefused)
}

// scrubCall replaces the call's own credential values in the answer, in
// the encodings an API may echo them in; a body without them is returned
// as is.
func scrubCall(body []byte, secrets []string) []byte {
	for _, s := range secrets {
		if len(s) < 4 {
			continue
		}
		if !bytes.Contains(body, []byte(s)) && !bytes.Contains(body, []byte(url.QueryEscape(s))) {
			continue
		}
		return []byte(scrubber(secrets).Replace(string(body)))
	}
	return body
}
