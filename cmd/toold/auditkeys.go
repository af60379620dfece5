package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/toold/toold/internal/config"
	"github.com/toold/toold/internal/events"
)

// auditKeyEnv holds the audit log's private key when no file does. main
// reads it once and removes it from the process environment.
const auditKeyEnv = "TOOLD_AUDIT_SIGNING_KEY"

// withdrawEnv reads the variables names once, removes them from the
// environment (no later lookup, and no process toold starts, sees them),
// and returns a lookup that still finds them. /proc/PID/environ keeps the
// environment the process started with: a file is the safer place for a
// key.
func withdrawEnv(lookup func(string) (string, bool), unset func(string) error, names ...string) func(string) (string, bool) {
	held := map[string]string{}
	for _, n := range names {
		if v, ok := lookup(n); ok {
			held[n] = v
			_ = unset(n)
		}
	}
	return func(k string) (string, bool) {
		if v, ok := held[k]; ok {
			return v, true
		}
		return lookup(k)
	}
}

// The key toold makes for an embedded store, in its directory: outside the
// store (whose clients cannot read or replace it), beside it on disk.
const (
	generatedKey    = "audit-signing.key"
	generatedPubKey = "audit-signing.pub"
)

// errNoAuditKey: a shared store's audit log needs a key every replica has.
var errNoAuditKey = &config.Error{Problems: []config.Problem{{Path: "state.audit.signing_key_file",
	Message: "the audit log of a shared store (state.nats.url) is signed with one key every replica holds: " +
		"make one with `toold audit keygen -o audit.key` and set signing_key_file or " + auditKeyEnv +
		" on every replica; or turn the audit log off (state.audit.enabled: false)"}}}

// auditSigner finds the key this replica signs the audit log with: the
// configured file, else the variable, else (embedded store only) the key
// in the store's directory, made there on first use when create is set.
func auditSigner(cfg *config.Config, dir string, lookupEnv func(string) (string, bool), create bool) (*events.Signer, string, error) {
	file := cfg.State.Audit.SigningKeyFile
	env, inEnv := lookupEnv(auditKeyEnv)
	switch {
	case file != "" && inEnv && env != "":
		return nil, "", fmt.Errorf("state.audit.signing_key_file and %s are both set: give one", auditKeyEnv)
	case file != "":
		s, err := readSigningKey(file)
		return s, file, err
	case inEnv && env != "":
		s, err := events.ParseSigningKey([]byte(env))
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", auditKeyEnv, err)
		}
		return s, auditKeyEnv, nil
	case cfg.State.NATS.URL != "" || dir == "":
		return nil, "", errNoAuditKey
	}
	file = filepath.Join(dir, generatedKey)
	s, err := readSigningKey(file)
	if !errors.Is(err, fs.ErrNotExist) || !create {
		return s, file, err
	}
	s = events.GenerateSigner()
	return s, file, writeKeyPair(file, filepath.Join(dir, generatedPubKey), s)
}

func readSigningKey(file string) (*events.Signer, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	s, err := events.ParseSigningKey(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return s, nil
}

// writeKeyPair writes a new private key (0600, never over an existing
// file) and its public key beside it.
func writeKeyPair(private, public string, s *events.Signer) error {
	f, err := os.OpenFile(private, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(s.MarshalPrivateKey())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.WriteFile(public, []byte(events.MarshalPublicKey(s.PublicKey())+"\n"), 0o644)
}

// auditKeyring is what verify trusts: the signing key's public half (when
// there is one), state.audit.trusted_keys, and the keys given on the
// command line.
func auditKeyring(cfg *config.Config, signer *events.Signer, more []string) (*events.Keyring, error) {
	k := events.NewKeyring()
	if signer != nil {
		k.Add(signer.PublicKey())
	}
	for _, s := range append(append([]string{}, cfg.State.Audit.TrustedKeys...), more...) {
		pub, err := events.LoadPublicKey(s)
		if err != nil {
			return nil, fmt.Errorf("public key %q: %w", s, err)
		}
		k.Add(pub)
	}
	return k, nil
}
