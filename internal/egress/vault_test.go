package egress

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/credentials"
	"github.com/toold/toold/internal/egress/egresstest"
	"github.com/toold/toold/internal/state"
)

// TestCallersOwnCredential: ${user:github} is the calling principal's
// own secret, read from toold's credential vault (sealed in a real state
// store) for the principal of the run's call, at the proxy: alice's run
// sends alice's, bob's run bob's; a caller who has set none is refused
// naming it; the anonymous caller, on a toold that refuses it, is
// refused saying why. No value is in a run's environment, its bundle, or
// what the server echoed back to it.
func TestCallersOwnCredential(t *testing.T) {
	ctx := context.Background()
	st, err := state.Open(ctx, state.Options{Dir: t.TempDir(), Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	kr, err := credentials.NewKeyring(credentials.NewKey(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var used []string
	vault, err := credentials.New(ctx, credentials.Options{KV: st.Credentials, NotFound: state.ErrNotFound, Conflict: state.ErrConflict,
		Keys: kr, OnUse: func(_ context.Context, who *auth.Identity, _, name string) { used = append(used, who.Name+"/"+name) }})
	if err != nil {
		t.Fatal(err)
	}
	alice := &auth.Identity{Kind: auth.KindKey, Name: "alice"}
	bob := &auth.Identity{Kind: auth.KindKey, Name: "bob"}
	carol := &auth.Identity{Kind: auth.KindKey, Name: "carol"}
	secrets := map[*auth.Identity]string{alice: "ghp_alice_0123456789abcdef", bob: "ghp_bob_fedcba9876543210xyz"}
	for who, v := range secrets {
		if _, err := vault.PutSecret(ctx, who, "github", []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	ca := egresstest.NewCA(t)
	srv := ca.Server(t, "api.test")
	port := strconv.Itoa(srv.Port)
	p := Policy{Allow: []string{"api.test:" + port, "127.0.0.1:" + port}, CAFiles: []string{ca.File},
		Inject: []Inject{{Host: "api.test", Header: "Authorization", Value: "token ${user:github}"}}}
	names := map[string]string{"api.test": "127.0.0.1"}
	for _, tc := range []struct {
		name   string
		who    *auth.Identity
		status int
		want   string // in the response: the header the server saw, or the refusal
	}{
		{"alice", alice, 200, `"Authorization":["[redacted by toold]"]`},
		{"bob", bob, 200, `"Authorization":["[redacted by toold]"]`},
		{"carol has none", carol, 403, `credential_missing`},
		{"anonymous", nil, 403, "per-user credentials need a named caller"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(srv.Seen())
			f := serveWith(t, auth.WithIdentity(ctx, tc.who), vault, p, names, RunOptions{})
			code, body := get(f.client(f.bundlePool(t)), "https://api.test:"+port+"/")
			if code != tc.status || !strings.Contains(body, tc.want) {
				t.Fatalf("%d %s", code, body)
			}
			seen := srv.Seen()[before:]
			if tc.status == 200 {
				if len(seen) != 1 || seen[0].Header.Get("Authorization") != "token "+secrets[tc.who] {
					t.Errorf("the server saw %+v", seen)
				}
			} else if len(seen) != 0 {
				t.Errorf("a refused run reached the server: %+v", seen)
			}
			reachable := body + strings.Join(f.run.Env(f.proxy.Host, "/bundle.pem"), "\n") + string(f.run.Bundle())
			for _, v := range secrets {
				if strings.Contains(reachable, v) {
					t.Errorf("a secret reached the run: %s", reachable)
				}
			}
		})
	}
	if strings.Join(used, " ") != "alice/github bob/github" {
		t.Errorf("the vault's uses: %q", used)
	}
}
