package auth

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/toold/toold/internal/strictjson"
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
	// Groups are the groups a token's claims put its subject in
	// (auth.oauth.groups_claim), for policies (principal.groups). An
	// execution keeps them, so a step run later is decided alike.
	Groups []string `json:"groups,omitempty"`
	// Narrowed says a token's claims narrowed its issuer's tools
	// (auth.oauth.tool_claims) to Narrow, possibly to none. An execution
	// keeps both, so a step run later is held to them (AllowsWithin).
	Narrowed bool     `json:"narrowed,omitempty"`
	Narrow   []string `json:"narrow,omitempty"`
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
	id.Kind, id.Name, id.Narrowed, id.Narrow = KindToken, TokenName(id.Issuer, id.Subject), narrow != nil, narrow
	return &Principal{Identity: id, patterns: tools, roles: slices.Clip(roles)}
}

// Who is the identity a call's records show, or nil for the anonymous
// caller (a toold without credentials has one caller, and says nothing
// of it).
func (p *Principal) Who() *Identity {
	if p == nil || p.Kind == KindAnonymous {
		return nil
	}
	return &p.Identity
}

// AllowsWithin reports whether a tool passes tools and the identity's
// narrowing, if it has one: the check of a token's call run after its
// request, against its issuer's tools as configured then.
func (id *Identity) AllowsWithin(tools []string, tool string) bool {
	return Matches(tools, tool) && (!id.Narrowed || Matches(id.Narrow, tool))
}

// ViewKey names what the principal may see, for caches of listings: a
// key's name (each key has patterns of its own), or for a token its issuer
// and its claims' narrowing, which with the issuer's tools decide its
// tools whoever the subject is (so every subject with the same grants
// shares one cached listing).
func (p *Principal) ViewKey() string {
	if p.Kind != KindToken {
		return p.Name
	}
	k := "\x00token\x00" + p.Issuer
	if p.Narrowed {
		k += "\x00narrowed\x00" + strings.Join(p.Narrow, "\x00")
	}
	return k
}

// Roles lists the roles the principal holds.
func (p *Principal) Roles() []Role { return slices.Clone(p.roles) }

type identityKey struct{}

// WithIdentity returns ctx carrying who calls are for, for work done
// after the request (an async batch's calls); nil leaves ctx as it is.
func WithIdentity(ctx context.Context, id *Identity) context.Context {
	if id == nil {
		return ctx
	}
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom is who ctx's calls are for: the identity WithIdentity
// stored, or that of the principal NewContext stored; nil for none (or
// the anonymous caller).
func IdentityFrom(ctx context.Context) *Identity {
	if id, ok := ctx.Value(identityKey{}).(*Identity); ok {
		return id
	}
	return FromContext(ctx).Who()
}

// AppendJSON appends the identity as encoding/json writes it, without
// reflection (envelopes, events and audit records carry it on every call
// of a principal); withNarrow false leaves out the tool narrowing and the
// groups, which only the caller and its executions need.
func (id *Identity) AppendJSON(dst []byte, withNarrow bool) []byte {
	dst = append(dst, `{"kind":`...)
	dst = strictjson.AppendString(dst, id.Kind)
	dst = append(dst, `,"name":`...)
	dst = strictjson.AppendString(dst, id.Name)
	for _, f := range [...]struct{ name, v string }{{"issuer", id.Issuer}, {"subject", id.Subject}, {"client", id.Client}, {"actor", id.Actor}} {
		if f.v != "" {
			dst = append(dst, ',', '"')
			dst = append(dst, f.name...)
			dst = append(dst, '"', ':')
			dst = strictjson.AppendString(dst, f.v)
		}
	}
	if withNarrow && id.Narrowed {
		dst = append(dst, `,"narrowed":true`...)
	}
	if withNarrow && len(id.Narrow) > 0 {
		b, _ := json.Marshal(id.Narrow) // tool patterns: rare, short
		dst = append(dst, `,"narrow":`...)
		dst = append(dst, b...)
	}
	if withNarrow && len(id.Groups) > 0 {
		b, _ := json.Marshal(id.Groups) // a token's groups: few, short
		dst = append(dst, `,"groups":`...)
		dst = append(dst, b...)
	}
	return append(dst, '}')
}
