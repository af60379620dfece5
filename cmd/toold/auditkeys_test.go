package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toold/toold/internal/config"
	"github.com/toold/toold/internal/events"
)

// TestAuditSigner: where the audit key comes from, in order: the
// configured file, the variable, and for an embedded store only a key
// toold makes once in its directory and reuses; a shared store without a
// key, two keys at once, or a malformed one are refused.
func TestAuditSigner(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "audit.key")
	var stdout, stderr bytes.Buffer
	if err := keygen(keyFile, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	fromFile, _ := readSigningKey(keyFile)
	seed := strings.Repeat("3c", 32)
	fromSeed, _ := events.ParseSigningKey([]byte(seed))
	none := map[string]string{}
	withSeed := map[string]string{auditKeyEnv: seed}
	cfg := func(file, url string) *config.Config {
		c := config.Default()
		c.State.Audit.SigningKeyFile, c.State.NATS.URL = file, url
		return c
	}
	store := t.TempDir()
	tests := []struct {
		name string
		cfg  *config.Config
		env  map[string]string
		want *events.Signer // nil: an error
	}{
		{"file", cfg(keyFile, "nats://n:4222"), none, fromFile},
		{"variable", cfg("", "nats://n:4222"), withSeed, fromSeed},
		{"both", cfg(keyFile, ""), withSeed, nil},
		{"shared store, no key", cfg("", "nats://n:4222"), none, nil},
		{"malformed variable", cfg("", ""), map[string]string{auditKeyEnv: "replace-me"}, nil},
		{"missing file", cfg(filepath.Join(dir, "missing"), ""), none, nil},
	}
	for _, tt := range tests {
		got, _, err := auditSigner(tt.cfg, store, func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }, true)
		switch {
		case tt.want == nil && err == nil:
			t.Errorf("%s: accepted", tt.name)
		case tt.want != nil && (err != nil || got.KeyID() != tt.want.KeyID()):
			t.Errorf("%s: %v, %v", tt.name, got, err)
		}
	}
	lookup := func(string) (string, bool) { return "", false }
	if _, _, err := auditSigner(cfg("", ""), store, lookup, false); !os.IsNotExist(err) {
		t.Errorf("an embedded store's key made without create: %v", err)
	}
	made, from, err := auditSigner(cfg("", ""), store, lookup, true)
	if err != nil || from != filepath.Join(store, generatedKey) {
		t.Fatalf("an embedded store's key: %v %s", err, from)
	}
	again, _, err := auditSigner(cfg("", ""), store, lookup, true)
	if err != nil || again.KeyID() != made.KeyID() {
		t.Errorf("the key was not reused: %v", err)
	}
	if fi, err := os.Stat(from); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the key file: %v %v", fi, err)
	}
	pub, err := events.LoadPublicKey(filepath.Join(store, generatedPubKey))
	if err != nil || events.KeyID(pub) != made.KeyID() {
		t.Errorf("the public key beside it: %v", err)
	}
}

// TestAuditKeyCommands: keygen writes a key and its public half; public-key
// prints the public half of the key the server would sign with.
func TestAuditKeyCommands(t *testing.T) {
	key := filepath.Join(t.TempDir(), "audit.key")
	var out, errOut bytes.Buffer
	lookup := func(string) (string, bool) { return "", false }
	if err := run(context.Background(), []string{"audit", "keygen", "-o", key}, lookup, nil, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	pubFile, _ := os.ReadFile(key + ".pub")
	if !strings.Contains(errOut.String(), strings.TrimSpace(string(pubFile))) {
		t.Errorf("keygen printed %q; the .pub file holds %q", errOut.String(), pubFile)
	}
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(cfg, []byte("state: {audit: {signing_key_file: "+key+"}}\n"), 0o600)
	out.Reset()
	if err := run(context.Background(), []string{"audit", "public-key", "-config", cfg}, lookup, nil, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(out.String()) != strings.TrimSpace(string(pubFile)) {
		t.Errorf("public-key printed %q, want %q", out.String(), pubFile)
	}
	if err := run(context.Background(), []string{"audit", "keygen", "-o", key}, lookup, nil, &out, &errOut); err == nil {
		t.Error("keygen wrote over an existing key")
	}
}

// TestWithdrawEnv: the audit key is read once and gone from the
// environment; lookups still find it, and other variables as before.
func TestWithdrawEnv(t *testing.T) {
	t.Setenv(auditKeyEnv, "the-key")
	t.Setenv("TOOLD_OTHER", "x")
	lookup := withdrawEnv(os.LookupEnv, os.Unsetenv, auditKeyEnv)
	if _, ok := os.LookupEnv(auditKeyEnv); ok {
		t.Error("the key is still in the environment")
	}
	if v, ok := lookup(auditKeyEnv); !ok || v != "the-key" {
		t.Errorf("lookup of the key: %q %v", v, ok)
	}
	if v, _ := lookup("TOOLD_OTHER"); v != "x" {
		t.Errorf("another variable: %q", v)
	}
}
