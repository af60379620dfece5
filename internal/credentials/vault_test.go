package credentials_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/credentials"
	"github.com/toold/toold/internal/state"
)

var (
	alice = &auth.Identity{Kind: auth.KindToken, Name: "u-alice@https://idp.test/", Issuer: "https://idp.test/", Subject: "u-alice"}
	bob   = &auth.Identity{Kind: auth.KindToken, Name: "u-bob@https://idp.test/", Issuer: "https://idp.test/", Subject: "u-bob"}
	// keyAlice is a key named as alice's token principal is: kinds keep
	// them apart.
	keyNamedLikeAlice = &auth.Identity{Kind: auth.KindKey, Name: "u-alice@https://idp.test/"}
)

func openStore(t *testing.T, dir string) *state.Store {
	t.Helper()
	st, err := state.Open(context.Background(), state.Options{Dir: dir, Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func vault(t *testing.T, st *state.Store, key string, previous ...string) (*credentials.Vault, error) {
	t.Helper()
	kr, err := credentials.NewKeyring(key, previous)
	if err != nil {
		t.Fatal(err)
	}
	return credentials.New(context.Background(), credentials.Options{KV: st.Credentials, NotFound: state.ErrNotFound,
		Conflict: state.ErrConflict, Keys: kr, Local: true})
}

func mustVault(t *testing.T, st *state.Store, key string, previous ...string) *credentials.Vault {
	t.Helper()
	v, err := vault(t, st, key, previous...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestSecretsPerPrincipal: each principal resolves only their own secret;
// another principal, a key named like a token principal, and the anonymous
// caller have none; a listing carries names and dates, never values;
// deleting forgets.
func TestSecretsPerPrincipal(t *testing.T) {
	ctx := context.Background()
	v := mustVault(t, openStore(t, t.TempDir()), credentials.NewKey())
	if _, err := v.PutSecret(ctx, alice, "github", []byte("ghp_alice_secret_value")); err != nil {
		t.Fatal(err)
	}
	if _, err := v.PutSecret(ctx, bob, "github", []byte("ghp_bob_secret_value")); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		who  *auth.Identity
		want string
	}{{alice, "ghp_alice_secret_value"}, {bob, "ghp_bob_secret_value"}, {keyNamedLikeAlice, ""}, {nil, ""}} {
		got, err := v.Resolve(ctx, tt.who, "github")
		if tt.want == "" {
			if !errors.Is(err, credentials.ErrMissing) {
				t.Errorf("%v: %q %v, want ErrMissing", tt.who, got, err)
			}
			continue
		}
		if err != nil || string(got) != tt.want {
			t.Errorf("%v: %q %v", tt.who, got, err)
		}
	}
	list, err := v.Secrets(ctx, alice)
	if err != nil || len(list) != 1 || list[0].Name != "github" || list[0].CreatedAt.IsZero() {
		t.Fatalf("alice's listing: %+v %v", list, err)
	}
	if ok, err := v.DeleteSecret(ctx, alice, "github"); !ok || err != nil {
		t.Fatalf("delete: %v %v", ok, err)
	}
	if _, err := v.Resolve(ctx, alice, "github"); !errors.Is(err, credentials.ErrMissing) {
		t.Errorf("after delete: %v", err)
	}
	if got, err := v.Resolve(ctx, bob, "github"); err != nil || string(got) != "ghp_bob_secret_value" {
		t.Errorf("bob's after alice's delete: %q %v", got, err)
	}
	if _, err := v.PutSecret(ctx, alice, "../etc", []byte("x")); err == nil {
		t.Error("a name with a slash was accepted")
	}
}

// TestAnonymousRefused: a vault for a toold listening beyond loopback
// refuses the anonymous caller instead of pooling everyone's secrets
// under "local".
func TestAnonymousRefused(t *testing.T) {
	st := openStore(t, t.TempDir())
	kr, _ := credentials.NewKeyring(credentials.NewKey(), nil)
	v, err := credentials.New(context.Background(), credentials.Options{KV: st.Credentials, NotFound: state.ErrNotFound,
		Conflict: state.ErrConflict, Keys: kr})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.PutSecret(context.Background(), nil, "x", []byte("v")); !errors.Is(err, credentials.ErrAnonymous) {
		t.Errorf("put: %v", err)
	}
	if _, err := v.Resolve(context.Background(), nil, "x"); !errors.Is(err, credentials.ErrAnonymous) {
		t.Errorf("resolve: %v", err)
	}
}

// TestRestartRotationAndWrongKey: the store's records survive a restart
// with the same key; a wrong key refuses to open the vault; a rotated key
// with the old one among previous_keys opens it and seals what it reads
// again with the new one, after which the old key alone is refused; and
// no stored file holds a value in clear.
func TestRestartRotationAndWrongKey(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	k1, k2 := credentials.NewKey(), credentials.NewKey()
	const secret = "glpat-this_is_alice_secret_token_value"
	st := openStore(t, dir)
	v := mustVault(t, st, k1)
	if _, err := v.PutSecret(ctx, alice, "gitlab", []byte(secret)); err != nil {
		t.Fatal(err)
	}
	if _, err := v.SaveTokens(ctx, credentials.Principal(alice), "github", &credentials.Token{AccessToken: "oauth_access_in_clear_never",
		RefreshToken: "oauth_refresh_in_clear_never", ConnectedAt: time.Now()}, 0); err != nil {
		t.Fatal(err)
	}
	st.Close()
	grepStore(t, dir, secret, "oauth_access_in_clear_never", "oauth_refresh_in_clear_never")

	st = openStore(t, dir)
	if _, err := vault(t, st, k2); !errors.Is(err, credentials.ErrWrongKey) {
		t.Fatalf("a wrong key: %v, want ErrWrongKey", err)
	}
	v = mustVault(t, st, k1)
	if got, err := v.Resolve(ctx, alice, "gitlab"); err != nil || string(got) != secret {
		t.Fatalf("after a restart: %q %v", got, err)
	}
	mustVault(t, st, k2, k1) // rotated: every record is sealed again with k2
	if _, err := vault(t, st, k1); !errors.Is(err, credentials.ErrWrongKey) {
		t.Errorf("the old key alone after a rotation: %v", err)
	}
	v = mustVault(t, st, k2) // the old key is gone from previous_keys
	if got, err := v.Resolve(ctx, alice, "gitlab"); err != nil || string(got) != secret {
		t.Fatalf("the new key alone: %q %v", got, err)
	}
	if tok, _, err := v.Tokens(ctx, credentials.Principal(alice), "github"); err != nil || tok.AccessToken != "oauth_access_in_clear_never" {
		t.Fatalf("tokens with the new key alone: %+v %v", tok, err)
	}
}

// grepStore fails if any file of the store holds one of the values.
func grepStore(t *testing.T, dir string, values ...string) {
	t.Helper()
	files := 0
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files++
		for _, v := range values {
			if bytes.Contains(b, []byte(v)) {
				t.Errorf("%s holds %q in clear", p, v)
			}
		}
		return nil
	})
	if err != nil || files == 0 {
		t.Fatalf("walking the store: %d files, %v", files, err)
	}
}

// TestRecordsBoundToPrincipalAndName: a sealed record copied under
// another principal's key, or another name, does not open.
func TestRecordsBoundToPrincipalAndName(t *testing.T) {
	kr, err := credentials.NewKeyring(credentials.NewKey(), nil)
	if err != nil {
		t.Fatal(err)
	}
	sealed := kr.Seal(credentials.KindSecret, credentials.Principal(alice), "github", []byte("v"))
	for _, tt := range []struct{ kind, principal, name string }{
		{credentials.KindSecret, credentials.Principal(bob), "github"},
		{credentials.KindSecret, credentials.Principal(keyNamedLikeAlice), "github"},
		{credentials.KindSecret, credentials.Principal(alice), "gitlab"},
		{credentials.KindOAuth, credentials.Principal(alice), "github"},
	} {
		if _, _, err := kr.Open(tt.kind, tt.principal, tt.name, sealed); !errors.Is(err, credentials.ErrSealed) {
			t.Errorf("%v opened: %v", tt, err)
		}
	}
	if plain, stale, err := kr.Open(credentials.KindSecret, credentials.Principal(alice), "github", sealed); err != nil || stale || string(plain) != "v" {
		t.Errorf("its own: %q %v %v", plain, stale, err)
	}
	tampered := bytes.Clone(sealed)
	tampered[len(tampered)-1] ^= 1
	if _, _, err := kr.Open(credentials.KindSecret, credentials.Principal(alice), "github", tampered); !errors.Is(err, credentials.ErrSealed) {
		t.Errorf("tampered: %v", err)
	}
}

// TestKeys: keys parse from base64 of 32 bytes only, and errors never
// quote them.
func TestKeys(t *testing.T) {
	k := credentials.NewKey()
	if _, err := credentials.ParseKey(k); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "c2hvcnQ=", "not base64 at all!", k + k} {
		_, err := credentials.ParseKey(bad)
		if err == nil {
			t.Errorf("%q accepted", bad)
		} else if bad != "" && strings.Contains(err.Error(), bad) {
			t.Errorf("the error quotes the key: %v", err)
		}
	}
	if _, err := credentials.NewKeyring(k, []string{k}); err == nil {
		t.Error("the current key as a previous one was accepted")
	}
}

// TestFlowsAreSingleUse: an authorization in progress is taken once.
func TestFlowsAreSingleUse(t *testing.T) {
	ctx := context.Background()
	v := mustVault(t, openStore(t, t.TempDir()), credentials.NewKey())
	if err := v.SaveFlow(ctx, "n1", []byte(`{"x":1}`), time.Minute); err != nil {
		t.Fatal(err)
	}
	if got, err := v.TakeFlow(ctx, "n1"); err != nil || string(got) != `{"x":1}` {
		t.Fatalf("first take: %q %v", got, err)
	}
	if _, err := v.TakeFlow(ctx, "n1"); !errors.Is(err, credentials.ErrMissing) {
		t.Errorf("second take: %v", err)
	}
}
