package oauth

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// maxTokenBytes bounds a presented token: the largest IdP tokens with
// many groups stay well under it; anything longer is refused unparsed.
const maxTokenBytes = 16 << 10

// tokenError is a token that is not valid: 401 invalid_token. msg says
// why, never quoting the token.
type tokenError struct{ msg string }

func (e *tokenError) Error() string { return e.msg }

func invalid(format string, args ...any) error { return &tokenError{msg: fmt.Sprintf(format, args...)} }

// clip bounds what a refusal quotes of a token (its typ, kid, iss): the
// client wrote it, and a refusal should not grow with it.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// acceptedTypes are the typ headers of access tokens: RFC 9068's, and the
// plain JWT (or none) most IdPs write. Any other (an ID token's logout
// token, a DPoP proof, a SET) is not an access token.
var acceptedTypes = []string{"", "jwt", "at+jwt", "application/at+jwt"}

// parsedJWT is a JWS whose header passed the policy, not yet verified.
type parsedJWT struct {
	sig *jose.JSONWebSignature
	alg jose.SignatureAlgorithm
	kid string
	// iss is the unverified issuer: it chooses whose keys verify it.
	iss string
}

// looksLikeJWT reports whether raw has the shape of a JWS in compact
// serialization (three base64url parts), the only form of JWT accepted;
// anything else is an opaque token, for introspection.
func looksLikeJWT(raw string) bool {
	return strings.Count(raw, ".") == 2 && strings.HasPrefix(raw, "eyJ")
}

// parseJWT parses a token in the JWS compact form and applies the header
// policy: an algorithm of algs (so never "none" nor an HMAC), one
// signature, an access token's typ, no critical extensions. It reads the
// unverified iss, which only chooses the keys.
func parseJWT(raw string, algs []jose.SignatureAlgorithm) (*parsedJWT, error) {
	if len(raw) > maxTokenBytes {
		return nil, invalid("the token is longer than %d bytes", maxTokenBytes)
	}
	sig, err := jose.ParseSignedCompact(raw, algs)
	if err != nil {
		return nil, invalid("the token is not a JWS signed with an accepted algorithm (%v): %v", algs, err)
	}
	if len(sig.Signatures) != 1 {
		return nil, invalid("the token carries %d signatures", len(sig.Signatures))
	}
	h := sig.Signatures[0].Header
	if typ, _ := h.ExtraHeaders[jose.HeaderType].(string); !slices.Contains(acceptedTypes, strings.ToLower(typ)) {
		return nil, invalid("the token's typ %q is not an access token's", clip(typ))
	}
	if _, ok := h.ExtraHeaders["crit"]; ok {
		return nil, invalid("the token names critical header extensions")
	}
	var peek struct {
		Iss string `json:"iss"`
	}
	if err := json.Unmarshal(sig.UnsafePayloadWithoutVerification(), &peek); err != nil {
		return nil, invalid("the token's claims are not a JSON object")
	}
	return &parsedJWT{sig: sig, alg: jose.SignatureAlgorithm(h.Algorithm), kid: h.KeyID, iss: peek.Iss}, nil
}

// verify checks the signature with the first of keys that verifies it and
// returns the payload.
func (p *parsedJWT) verify(keys []jose.JSONWebKey) ([]byte, error) {
	for _, k := range keys {
		if payload, err := p.sig.Verify(k); err == nil {
			return payload, nil
		}
	}
	return nil, invalid("the token's signature does not verify with the issuer's key %q", clip(p.kid))
}

// claimSet is a token's claims (a JWT's payload, or an introspection
// answer).
type claimSet map[string]any

// parseClaims decodes a JSON object of claims, numbers kept exact.
func parseClaims(b []byte) (claimSet, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var c claimSet
	if err := dec.Decode(&c); err != nil || c == nil {
		return nil, invalid("the token's claims are not a JSON object")
	}
	if dec.More() {
		return nil, invalid("the token's claims are followed by more data")
	}
	return c, nil
}

// str is a string claim, or "".
func (c claimSet) str(name string) string {
	s, _ := c[name].(string)
	return s
}

// time is a NumericDate claim; ok false when it is absent or not a number.
func (c claimSet) time(name string) (time.Time, bool, error) {
	v, present := c[name]
	if !present {
		return time.Time{}, false, nil
	}
	n, ok := v.(json.Number)
	if !ok {
		return time.Time{}, false, invalid("the claim %s is not a number", name)
	}
	f, err := n.Float64()
	if err != nil || f < 0 || f > 1e11 {
		return time.Time{}, false, invalid("the claim %s is not a date", name)
	}
	sec := int64(f)
	return time.Unix(sec, int64((f-float64(sec))*1e9)), true, nil
}

// values are the strings of a claim at a dotted path: a string (split on
// spaces when split is set, as scope is), or an array's strings.
func (c claimSet) values(path string, split bool) []string {
	var v any = map[string]any(c)
	for part := range strings.SplitSeq(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[part]
	}
	switch v := v.(type) {
	case string:
		if split {
			return strings.Fields(v)
		}
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// scopes are the token's scope values: scope (RFC 9068, RFC 7662), or
// scp (a space-separated string or an array, as Azure AD and Okta write).
func (c claimSet) scopes() []string {
	if s := c.values("scope", true); s != nil {
		return s
	}
	return c.values("scp", true)
}

// actor is the subject of the act claim (RFC 8693 §4.1): the party that
// acts for the subject now (an outer act; earlier actors nest inside it).
func (c claimSet) actor() string {
	act, _ := c["act"].(map[string]any)
	s, _ := act["sub"].(string)
	return s
}

// checkTimes applies exp (required), nbf and iat, with skew.
func (c claimSet) checkTimes(now time.Time, skew time.Duration) (time.Time, error) {
	exp, ok, err := c.time("exp")
	if err != nil {
		return time.Time{}, err
	}
	if !ok {
		return time.Time{}, invalid("the token has no exp")
	}
	if now.After(exp.Add(skew)) {
		return time.Time{}, invalid("the token expired at %s", exp.UTC().Format(time.RFC3339))
	}
	if nbf, ok, err := c.time("nbf"); err != nil {
		return time.Time{}, err
	} else if ok && nbf.After(now.Add(skew)) {
		return time.Time{}, invalid("the token is not valid before %s", nbf.UTC().Format(time.RFC3339))
	}
	if iat, ok, err := c.time("iat"); err != nil {
		return time.Time{}, err
	} else if ok && iat.After(now.Add(skew)) {
		return time.Time{}, invalid("the token was issued in the future (%s)", iat.UTC().Format(time.RFC3339))
	}
	return exp, nil
}

// hasAudience reports whether the aud claim (a string or an array) names
// audience.
func (c claimSet) hasAudience(audience string) bool {
	return slices.Contains(c.values("aud", false), audience)
}
