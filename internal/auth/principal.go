package auth

import (
	"slices"
	"unicode"
	"unicode/utf8"
)

// The kinds of principal.
const (
	// KindKey is an API key's holder, named by the key's name.
	KindKey = "key"
	// KindToken is the subject of an OAuth access token at its issuer.
	KindToken = "token"
	// KindAnonymous is the local user of a toold without credentials.
	KindAnonymous = "anonymous"
)

// Identity is who a call is for, as envelopes, records, events and traces
// show it. Name is the one string every record keys on (the caller): a
// key's name, or for a token its subject and issuer, "<sub>@<issuer>"
// (TokenName), so the same person at the same issuer is the same caller
// whichever client acted for them, and self-approval is judged by subject.
// An identity never holds a credential.
type Identity struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Issuer and Subject are a token's iss and sub.
	Issuer  string `json:"issuer,omitempty"`
	Subject string `json:"subject,omitempty"`
	// Client is the OAuth client that presented the token (client_id, or
	// azp), the agent backend acting for the subject.
	Client string `json:"client,omitempty"`
	// Actor is the subject of the token's act claim (RFC 8693): who
	// called on the subject's behalf, by delegation.
	Actor string `json:"actor,omitempty"`
}

// TokenName is the caller name of a token's subject at its issuer. An
// issuer is a URL without user information, so the last "@" splits the
// two, and no key can have the name (a key's name may not hold "://").
func TokenName(issuer, subject string) string { return subject + "@" + issuer }

// ValidSubject reports whether a token's subject can name a caller:
// 1-255 bytes of UTF-8 without control characters, so that it can be
// logged, shown and written into records as it is.
func ValidSubject(s string) bool {
	if s == "" || len(s) > 255 || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			return false
		}
	}
	return true
}

// NewTokenPrincipal is the principal of a verified token: its identity,
// the tool patterns of its issuer, the patterns its claims narrow them to
// (nil: not narrowed), and the roles its scopes and claims grant.
func NewTokenPrincipal(id Identity, tools, narrow []string, roles []Role) *Principal {
	id.Kind = KindToken
	id.Name = TokenName(id.Issuer, id.Subject)
	return &Principal{Identity: id, patterns: tools, narrow: narrow, roles: slices.Clip(roles)}
}

// Narrow is what the principal's claims narrowed its tools to (nil when
// they did not): an execution run later is held to it (see AllowsNarrowed).
func (p *Principal) Narrow() []string { return p.narrow }

// AllowsNarrowed reports whether a tool passes both pattern lists, the
// second only when it is not nil: the check of a token's call run after
// its request, against its issuer's tools as configured then and the
// narrowing its claims had.
func AllowsNarrowed(tools, narrow []string, tool string) bool {
	return Matches(tools, tool) && (narrow == nil || Matches(narrow, tool))
}

// Roles lists the roles the principal holds.
func (p *Principal) Roles() []Role { return slices.Clone(p.roles) }
