package oauth

import (
	"strings"
)

// Challenge is a Bearer challenge, the value of a WWW-Authenticate header
// (RFC 6750 §3, RFC 9728 §5.1): what a client must send, and where it
// learns how to get it.
type Challenge struct {
	Realm string
	// ResourceMetadata is the URL of the protected resource metadata.
	ResourceMetadata string
	// Error is invalid_token (a token was sent and refused),
	// insufficient_scope (403: it lacks the scope), or empty (no token).
	Error       string
	Description string
	// Scope is what the request needs (space-separated scopes).
	Scope string
}

// maxParam bounds each value written: a description quoting a long claim
// cannot grow a header past what proxies accept.
const maxParam = 256

// String writes the challenge. Every value is a quoted-string of
// printable ASCII without '"' and '\' (what RFC 6750 allows in
// error_description and scope, and a safe subset of RFC 9110's
// quoted-string for the others): anything else is replaced with '?', and
// each value is cut at maxParam bytes. So nothing a token or a client sent
// can break the header, or add one.
func (c Challenge) String() string {
	var b strings.Builder
	b.WriteString("Bearer")
	sep := " "
	param := func(name, value string) {
		if value == "" {
			return
		}
		b.WriteString(sep)
		sep = ", "
		b.WriteString(name)
		b.WriteString(`="`)
		writeQuoted(&b, value)
		b.WriteByte('"')
	}
	param("realm", c.Realm)
	param("resource_metadata", c.ResourceMetadata)
	param("error", c.Error)
	param("error_description", c.Description)
	param("scope", c.Scope)
	return b.String()
}

func writeQuoted(b *strings.Builder, v string) {
	if len(v) > maxParam {
		v = v[:maxParam]
	}
	for i := 0; i < len(v); i++ {
		ch := v[i]
		if ch < 0x20 || ch > 0x7e || ch == '"' || ch == '\\' {
			ch = '?'
		}
		b.WriteByte(ch)
	}
}
