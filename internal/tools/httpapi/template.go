package httpapi

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/toold/toold/internal/tools"
)

// text is a string with {name} placeholders ({+name} in a path keeps the
// slashes of its value); {{ and }} are literal braces.
type text []part

type part struct {
	lit      string
	name     string // a placeholder when not empty
	reserved bool   // {+name}
}

func parseText(s string) (text, error) {
	var t text
	var lit strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '{' && strings.HasPrefix(s[i:], "{{"), c == '}' && strings.HasPrefix(s[i:], "}}"):
			lit.WriteByte(c)
			i++
		case c == '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return nil, fmt.Errorf("%q: a { without its } (write {{ for a literal brace)", s)
			}
			name, reserved := strings.CutPrefix(s[i+1:i+end], "+")
			if !tools.NamePattern.MatchString(name) {
				return nil, fmt.Errorf("%q: {%s} is not a placeholder: name a parameter, as {owner}", s, s[i+1:i+end])
			}
			if lit.Len() > 0 {
				t = append(t, part{lit: lit.String()})
				lit.Reset()
			}
			t = append(t, part{name: name, reserved: reserved})
			i += end
		default:
			lit.WriteByte(c)
		}
	}
	if lit.Len() > 0 || len(t) == 0 {
		t = append(t, part{lit: lit.String()})
	}
	return t, nil
}

// whole returns the placeholder that is the entire text, if it is one.
func (t text) whole() (part, bool) {
	if len(t) == 1 && t[0].name != "" {
		return t[0], true
	}
	return part{}, false
}

func (t text) names() []string {
	var out []string
	for _, p := range t {
		if p.name != "" {
			out = append(out, p.name)
		}
	}
	return out
}

// literal reports a text without placeholders.
func (t text) literal() bool { return len(t.names()) == 0 }

// render writes the text with each placeholder's value; ok is false when
// an argument is absent.
func (t text) render(args map[string]any) (out string, ok bool, err error) {
	var b strings.Builder
	for _, p := range t {
		if p.name == "" {
			b.WriteString(p.lit)
			continue
		}
		v, present := args[p.name]
		if !present || v == nil {
			return "", false, nil
		}
		s, err := scalar(p.name, v)
		if err != nil {
			return "", false, err
		}
		b.WriteString(s)
	}
	return b.String(), true, nil
}

// scalar is an argument's text in a URL or header.
func scalar(name string, v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case json.Number:
		return v.String(), nil
	case float64: // arguments decoded without the pipeline's tree
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	case bool:
		return strconv.FormatBool(v), nil
	}
	return "", argError(name, "is a list or an object; it can only be a whole query value or a body value")
}

func argError(name, format string, args ...any) *tools.Error {
	e := tools.Errorf(tools.ValidationError, "argument %q %s", name, fmt.Sprintf(format, args...))
	e.Fields = []tools.FieldError{{Pointer: "/" + tools.PointerToken(name),
		Message: fmt.Sprintf(format, args...)}}
	return e
}

// urlTemplate is scheme://host[:port] (literal) and a path of segments
// with placeholders, plus a literal query.
type urlTemplate struct {
	base     *url.URL
	segments []text
	query    string
}

func parseURL(raw string) (*urlTemplate, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, fmt.Errorf("%q is not an absolute URL (https://host/path)", raw)
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority := rest[:end]
	if strings.ContainsAny(authority, "{}") {
		return nil, fmt.Errorf("%q: the host cannot hold a placeholder; arguments go in the path, query, headers or body", raw)
	}
	base, err := url.Parse(scheme + "://" + authority)
	if err != nil || base.Host == "" || base.User != nil {
		return nil, fmt.Errorf("%q: scheme://host[:port] must be a plain host, without credentials", raw)
	}
	rest = rest[end:]
	if strings.Contains(rest, "#") {
		return nil, fmt.Errorf("%q: a URL sent to an API has no #fragment", raw)
	}
	path, query, _ := strings.Cut(rest, "?")
	if strings.ContainsAny(query, "{}") {
		return nil, fmt.Errorf("%q: placeholders in the query string go in request.query", raw)
	}
	u := &urlTemplate{base: base, query: query}
	if path == "" {
		return u, nil
	}
	for _, seg := range strings.Split(path[1:], "/") {
		t, err := parseText(seg)
		if err != nil {
			return nil, err
		}
		if t.literal() && (seg == "." || seg == "..") {
			return nil, fmt.Errorf("%q: a path cannot hold %q segments", raw, seg)
		}
		u.segments = append(u.segments, t)
	}
	return u, nil
}

func (u *urlTemplate) names() []string {
	var out []string
	for _, s := range u.segments {
		out = append(out, s.names()...)
	}
	return out
}

// render builds the URL. Each placeholder's value is escaped into its
// segment, so it can add neither a segment nor a query; a value that would
// make a "." or ".." segment, or an empty one, is refused; {+name} keeps
// slashes, each piece checked the same way. The host is checked to be the
// template's, whatever happened.
func (u *urlTemplate) render(args map[string]any, query string) (*url.URL, error) {
	var path strings.Builder
	path.Grow(64)
	for _, seg := range u.segments {
		if err := renderSegment(&path, seg, args); err != nil {
			return nil, err
		}
	}
	q := u.query
	if query != "" {
		if q != "" {
			q += "&"
		}
		q += query
	}
	raw := u.base.Scheme + "://" + u.base.Host + path.String()
	if q != "" {
		raw += "?" + q
	}
	out, err := url.Parse(raw)
	if err != nil || out.Host != u.base.Host || out.Scheme != u.base.Scheme {
		return nil, tools.Errorf(tools.SecurityError, "the arguments would change where the request goes").WithCode(tools.CodeURLChanged)
	}
	return out, nil
}

// renderSegment writes "/" and one segment, escaped, into path.
func renderSegment(path *strings.Builder, seg text, args map[string]any) error {
	path.WriteByte('/')
	if seg.literal() {
		path.WriteString(seg[0].lit)
		return nil
	}
	plain := 0 // length of the segment unescaped, to spot an empty one
	dots := ""
	for _, p := range seg {
		if p.name == "" {
			path.WriteString(p.lit)
			plain, dots = short(plain, dots, p.lit)
			continue
		}
		v, present := args[p.name]
		if !present || v == nil {
			return argError(p.name, "is needed: it is part of the URL's path")
		}
		s, err := scalar(p.name, v)
		if err != nil {
			return err
		}
		esc, err := escapeSegment(p, s)
		if err != nil {
			return err
		}
		path.WriteString(esc)
		plain, dots = short(plain, dots, s)
	}
	if plain == 0 || dots == "." || dots == ".." {
		name := seg.names()[0]
		return argError(name, "would make the path segment %q; give a value that names something", dots)
	}
	return nil
}

// short adds s to a segment's length, and to its text while that could
// still be "." or "..".
func short(n int, text, s string) (int, string) {
	if n += len(s); n <= 2 {
		text += s
	}
	return n, text
}

// escapeSegment escapes a value into one path segment ({name}) or into
// slash-separated segments ({+name}), refusing dot and empty segments.
func escapeSegment(p part, s string) (string, error) {
	pieces := []string{s}
	if p.reserved {
		pieces = strings.Split(s, "/")
	}
	for i, piece := range pieces {
		for _, sub := range strings.FieldsFunc(piece, func(r rune) bool { return r == '/' || r == '\\' }) {
			if sub == "." || sub == ".." {
				return "", argError(p.name, "holds a %q path segment, which could climb out of the API's path", sub)
			}
		}
		if p.reserved && piece == "" {
			return "", argError(p.name, "holds an empty path segment (\"//\", or a leading or trailing /)")
		}
		pieces[i] = url.PathEscape(piece)
	}
	return strings.Join(pieces, "/"), nil
}

// body is a JSON body template: objects, arrays and literals as written;
// a string that is exactly one placeholder takes the argument's value with
// its type, or is left out when the argument is absent; other strings are
// rendered.
type body struct {
	object map[string]*body
	array  []*body
	text   text
	lit    any
	kind   byte // 'o', 'a', 't', 'l'
}

func parseBody(v any) (*body, error) {
	switch v := v.(type) {
	case map[string]any:
		b := &body{kind: 'o', object: map[string]*body{}}
		for k, item := range v {
			sub, err := parseBody(item)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			b.object[k] = sub
		}
		return b, nil
	case []any:
		b := &body{kind: 'a'}
		for i, item := range v {
			sub, err := parseBody(item)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			b.array = append(b.array, sub)
		}
		return b, nil
	case string:
		t, err := parseText(v)
		return &body{kind: 't', text: t}, err
	case nil, bool, int, int64, uint64, float64:
		return &body{kind: 'l', lit: v}, nil
	}
	return nil, fmt.Errorf("%T is not a JSON value", v)
}

func (b *body) names() []string {
	var out []string
	switch b.kind {
	case 'o':
		for _, sub := range b.object {
			out = append(out, sub.names()...)
		}
	case 'a':
		for _, sub := range b.array {
			out = append(out, sub.names()...)
		}
	case 't':
		out = b.text.names()
	}
	return out
}

// render returns the value, or ok false when it is left out.
func (b *body) render(args map[string]any) (v any, ok bool, err error) {
	switch b.kind {
	case 'o':
		m := make(map[string]any, len(b.object))
		for k, sub := range b.object {
			if v, ok, err := sub.render(args); err != nil {
				return nil, false, err
			} else if ok {
				m[k] = v
			}
		}
		return m, true, nil
	case 'a':
		a := make([]any, 0, len(b.array))
		for _, sub := range b.array {
			if v, ok, err := sub.render(args); err != nil {
				return nil, false, err
			} else if ok {
				a = append(a, v)
			}
		}
		return a, true, nil
	case 't':
		if p, whole := b.text.whole(); whole {
			v, ok := args[p.name]
			return v, ok && v != nil, nil
		}
		s, ok, err := b.text.render(args)
		return s, ok, err
	}
	return b.lit, true, nil
}
