package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/config"
	"github.com/toold/toold/internal/credentials"
	"github.com/toold/toold/internal/delegate"
	"github.com/toold/toold/internal/events"
	"github.com/toold/toold/internal/state"
)

// credentialsKeyEnv is the variable the documented configuration reads
// credentials.key from; like the audit key, it leaves the environment
// before anything else runs (no child process can inherit it).
const credentialsKeyEnv = "TOOLD_CREDENTIALS_KEY"

// runCredentials is `toold credentials keygen`: a fresh key for
// credentials.key.
func runCredentials(args []string, stdout, stderr io.Writer) error {
	if len(args) != 1 || args[0] != "keygen" {
		fmt.Fprintln(stderr, "usage: toold credentials keygen   (prints a key for credentials.key: 32 random bytes, base64)")
		return exitCode(2)
	}
	fmt.Fprintln(stdout, credentials.NewKey())
	return nil
}

// vaultRef is the credentials vault once the store is open: the tools
// that resolve callers' credentials are built before it (and
// -check-config never opens it).
type vaultRef struct {
	v atomic.Pointer[credentials.Vault]
}

var errVaultClosed = errors.New("the credentials vault is not open")

func (r *vaultRef) get() (*credentials.Vault, error) {
	if v := r.v.Load(); v != nil {
		return v, nil
	}
	return nil, errVaultClosed
}

func (r *vaultRef) Resolve(ctx context.Context, who *auth.Identity, name string) ([]byte, error) {
	v, err := r.get()
	if err != nil {
		return nil, err
	}
	return v.Resolve(ctx, who, name)
}

func (r *vaultRef) Holders(ctx context.Context, connection string) ([]string, error) {
	v, err := r.get()
	if err != nil {
		return nil, err
	}
	return v.Holders(ctx, connection)
}

func (r *vaultRef) SecretHolders(ctx context.Context, name string) ([]string, error) {
	v, err := r.get()
	if err != nil {
		return nil, err
	}
	return v.SecretHolders(ctx, name)
}

func (r *vaultRef) Lister(ctx context.Context, connection string) (string, error) {
	v, err := r.get()
	if err != nil {
		return "", err
	}
	return v.Lister(ctx, connection)
}

func (r *vaultRef) SetLister(ctx context.Context, connection, principal string) error {
	v, err := r.get()
	if err != nil {
		return err
	}
	return v.SetLister(ctx, connection, principal)
}

// credentialsSetup reads credentials.key and builds the delegation
// manager the tools register their connections with; without a key there
// is neither, and a tool that needs them is refused at start.
func (a *app) credentialsSetup() error {
	c := a.cfg.Credentials
	if c.Key == "" {
		if len(c.PreviousKeys) > 0 {
			return &config.Error{Problems: []config.Problem{{Path: "credentials.previous_keys", Message: "given without credentials.key"}}}
		}
		return nil
	}
	keys, err := credentials.NewKeyring(c.Key, c.PreviousKeys)
	if err != nil {
		return &config.Error{Problems: []config.Problem{{Path: "credentials", Message: err.Error()}}}
	}
	a.keys, a.vaults = keys, &vaultRef{}
	a.delegate, err = delegate.New(delegate.Options{Keys: keys, PublicURL: a.cfg.Server.PublicURL, Logger: a.log.Named("delegate"),
		OnConnect: a.onConnect, OnDisconnect: a.onDisconnect})
	return err
}

// openVault opens the vault on the store, refusing a key that does not
// open what the store holds.
func (a *app) openVault(rec *events.Recorder) error {
	if a.keys == nil {
		return nil
	}
	if a.store == nil {
		return &config.Error{Problems: []config.Problem{{Path: "credentials.key",
			Message: "per-user credentials live in the state store, which is off (state.enabled)"}}}
	}
	a.rec = rec
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, err := credentials.New(ctx, credentials.Options{KV: a.store.Credentials, NotFound: state.ErrNotFound, Conflict: state.ErrConflict,
		Keys: a.keys, Local: config.Loopback(a.cfg.Listen), OnUse: a.onUse})
	if errors.Is(err, credentials.ErrWrongKey) {
		return &config.Error{Problems: []config.Problem{{Path: "credentials.key", Message: err.Error()}}}
	}
	if err != nil {
		return fmt.Errorf("the credentials vault: %w", err)
	}
	a.vault = v
	a.vaults.v.Store(v)
	a.delegate.SetVault(v)
	return nil
}

// usedEvery bounds the audit of a credential's use: one record per
// principal, credential and minute on each replica, so the log says who
// used what without a second record for every call.
const usedEvery = time.Minute

type usedKey struct{ principal, kind, name string }

// onUse audits a principal's use of a credential (by name).
func (a *app) onUse(_ context.Context, who *auth.Identity, kind, name string) {
	if a.rec == nil {
		return
	}
	k := usedKey{credentials.Principal(who), kind, name}
	now := time.Now()
	a.usedMu.Lock()
	last, seen := a.used[k]
	if seen && now.Sub(last) < usedEvery {
		a.usedMu.Unlock()
		return
	}
	if a.used == nil || len(a.used) > 100_000 {
		a.used = map[usedKey]time.Time{}
	}
	a.used[k] = now
	a.usedMu.Unlock()
	a.rec.AdminBy(who, credentials.DisplayName(who), "credential_use", kind+":"+name, "")
}

// onConnect audits a new OAuth connection and lets a server waiting for
// one list its tools.
func (a *app) onConnect(_ context.Context, who *auth.Identity, connection string) {
	if a.rec != nil {
		a.rec.AdminBy(who, credentials.DisplayName(who), "credential_connect", "oauth:"+connection, "")
	}
	if a.upstream != nil {
		a.upstream.Connected(connection, who)
	}
	a.log.Info("an OAuth connection was made", zap.String("connection", connection))
}

// onDisconnect closes the principal's session with the server.
func (a *app) onDisconnect(_ context.Context, who *auth.Identity, connection string) {
	if a.upstream != nil {
		a.upstream.Disconnected(connection, who)
	}
}

// credentialState is the app's part for credentials.
type credentialState struct {
	keys     *credentials.Keyring
	vault    *credentials.Vault
	vaults   *vaultRef
	delegate *delegate.Manager
	rec      *events.Recorder
	usedMu   sync.Mutex
	used     map[usedKey]time.Time
}

// checkPublicURL refuses OAuth connections on a toold listening beyond
// loopback without server.public_url: the authorization server sends
// browsers back to it, and toold cannot know its name.
func (a *app) checkPublicURL() error {
	if a.delegate == nil || len(a.delegate.Names()) == 0 || a.cfg.Server.PublicURL != "" || config.Loopback(a.cfg.Listen) {
		return nil
	}
	return &config.Error{Problems: []config.Problem{{Path: "server.public_url", Message: "required for OAuth connections " +
		"(auth.oauth of an HTTP tool or an MCP server) when toold listens beyond loopback: the address browsers reach toold at, " +
		"where the authorization server sends them back (" + delegate.CallbackPath + ")"}}}
}
