package oauth

import (
	"context"
	"testing"
	"time"
)

// BenchmarkVerify is what the cache of verified tokens saves each call: a
// JWT of the real provider verified from scratch (parse, the policy, the
// RS256 signature, the claims, the principal), its keys already fetched.
//
//	go test -run '^$' -bench BenchmarkVerify ./internal/oauth/
func BenchmarkVerify(b *testing.B) {
	p := startProvider(b)
	v, err := New(Options{Issuers: Issuers{{Issuer: p.Issuer, Audience: resource, Allow: []string{"127.0.0.1"}, AllowHTTP: true}}})
	if err != nil {
		b.Fatal(err)
	}
	tok := p.ClientCredentials(agent, "toold:call").AccessToken
	ctx := context.Background()
	if _, err := v.Authenticate(ctx, tok); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := v.verify(ctx, tok, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
}
