package delegate

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"
)

type inboundKey struct{}

// WithInboundToken returns ctx carrying the caller's own access token, as
// toold verified it (auth.oauth), for token exchange and passthrough. It
// lives in the request's context only: never in a call, a record or a
// log line; an async execution run later does not have it.
func WithInboundToken(ctx context.Context, token string) context.Context {
	if token == "" {
		return ctx
	}
	return context.WithValue(ctx, inboundKey{}, token)
}

// InboundToken is the token WithInboundToken stored, or "".
func InboundToken(ctx context.Context) string {
	t, _ := ctx.Value(inboundKey{}).(string)
	return t
}

// expiry reads the exp claim of a JWT toold already verified; zero when
// it has none.
func expiry(token string) time.Time {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}
	}
	var claims struct {
		Exp json.Number `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil {
		return time.Time{}
	}
	n, err := claims.Exp.Int64()
	if err != nil || n <= 0 {
		return time.Time{}
	}
	return time.Unix(n, 0)
}

// audiences reads the aud claim of a JWT toold already verified: a
// string or a list; nil for anything else (an opaque token's audience is
// not known).
func audiences(token string) []string {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil
	}
	var claims struct {
		Aud json.RawMessage `json:"aud"`
	}
	if json.Unmarshal(payload, &claims) != nil {
		return nil
	}
	var one string
	if json.Unmarshal(claims.Aud, &one) == nil {
		return []string{one}
	}
	var many []string
	if json.Unmarshal(claims.Aud, &many) == nil {
		return many
	}
	return nil
}
