// Package auth authenticates API callers and decides which tools each may
// use. Keys are configured as SHA-256 hashes, so a leaked config file does
// not leak a key; a presented key is hashed and compared in constant time
// against every configured hash.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync/atomic"
)

// Key is one configured API key.
type Key struct {
	// Name identifies the caller in logs and to tools; never the key.
	Name string
	// SHA256 is the hex SHA-256 of the key.
	SHA256 string
	// Tools are path.Match patterns of tool names the key may use.
	Tools []string
	// Roles the key holds; none means RoleCall only.
	Roles []Role
	// Within, when set, narrows Tools to the toolsets the key is bound to
	// (auth.keys[].toolsets): it reports whether a tool is in one of
	// them.
	Within func(tool string) bool
}

// Role is what a key may do besides naming the tools it may use.
type Role string

// The roles. A new one is added here (and to Roles); routes ask for the
// role they need with Principal.Has.
const (
	// RoleCall executes tools: execute, async executions, batches.
	RoleCall Role = "call"
	// RoleObserve reads every replica's activity stream (GET /events).
	RoleObserve Role = "observe"
	// RoleAdmin reads the audit log (GET /audit).
	RoleAdmin Role = "admin"
	// RoleApprove lists the calls waiting for a person's approval and
	// decides on them (GET /approvals, POST /approvals/{id}).
	RoleApprove Role = "approve"
)

// Roles lists every role, for configuration checks and documentation.
var Roles = []Role{RoleCall, RoleObserve, RoleAdmin, RoleApprove}

// defaultRoles are a key's roles when its configuration names none.
var defaultRoles = []Role{RoleCall}

// Principal is an authenticated caller: who it is (Identity, whose Name
// every record keeps) and what it may do.
type Principal struct {
	Identity
	patterns []string
	roles    []Role
	within   func(string) bool
}

// Anonymous is the caller when no keys are configured: toold then listens
// on loopback only, and the local caller may use every tool and has every
// role.
var Anonymous = &Principal{Identity: Identity{Kind: KindAnonymous, Name: "anonymous"}, patterns: []string{"*"}, roles: Roles}

// Has reports whether the principal holds a role.
func (p *Principal) Has(r Role) bool { return slices.Contains(p.roles, r) }

// Allows reports whether the principal may use the named tool.
func (p *Principal) Allows(tool string) bool {
	if p.within != nil && !p.within(tool) {
		return false
	}
	return p.AllowsWithin(p.patterns, tool)
}

// Matches reports whether tool matches one of the path.Match patterns.
func Matches(patterns []string, tool string) bool {
	for _, pat := range patterns {
		if ok, _ := path.Match(pat, tool); ok {
			return true
		}
	}
	return false
}

// Keyring checks presented keys. A reload replaces its keys whole
// (Replace): a request checks against the keys current when it arrives.
type Keyring struct {
	set atomic.Pointer[[]keyEntry]
}

// keys are the keys now.
func (kr *Keyring) keys() []keyEntry {
	if kr == nil {
		return nil
	}
	if p := kr.set.Load(); p != nil {
		return *p
	}
	return nil
}

// Replace makes next's keys this keyring's, for every later request; a
// principal already authenticated keeps what it was given.
func (kr *Keyring) Replace(next *Keyring) {
	ks := next.keys()
	kr.set.Store(&ks)
}

type keyEntry struct {
	hash [sha256.Size]byte
	p    *Principal
}

// NewKeyring validates the keys: hashes must be 64 hex digits, names unique,
// patterns well-formed.
func NewKeyring(keys []Key) (*Keyring, error) {
	kr := &Keyring{}
	var list []keyEntry
	seen := map[string]bool{}
	var errs []error
	for i, k := range keys {
		fail := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("auth.keys[%d] (%s): %s", i, k.Name, fmt.Sprintf(format, args...)))
		}
		raw, err := hex.DecodeString(strings.ToLower(k.SHA256))
		if err != nil || len(raw) != sha256.Size {
			fail("sha256 must be 64 hex digits (toold -hash-key prints one)")
			continue
		}
		if seen[k.Name] {
			fail("duplicate key name")
		}
		if strings.Contains(k.Name, "://") {
			fail("a key's name may not contain \"://\": names of that form are a token's subject at its issuer")
		}
		seen[k.Name] = true
		for _, pat := range k.Tools {
			if _, err := path.Match(pat, ""); err != nil {
				fail("tool pattern %q is malformed", pat)
			}
		}
		roles := k.Roles
		if len(roles) == 0 {
			roles = defaultRoles
		}
		for _, r := range roles {
			if !slices.Contains(Roles, r) {
				fail("role %q is not one of %v", r, Roles)
			}
		}
		e := keyEntry{p: &Principal{Identity: Identity{Kind: KindKey, Name: k.Name}, patterns: k.Tools, roles: roles, within: k.Within}}
		copy(e.hash[:], raw)
		list = append(list, e)
	}
	kr.set.Store(&list)
	return kr, errors.Join(errs...)
}

// Enabled reports whether any key is configured.
func (kr *Keyring) Enabled() bool { return len(kr.keys()) > 0 }

// Authenticate returns the principal of a presented key, or nil. Every
// configured hash is compared, whatever matches, so the time taken does not
// tell which key (or how much of one) matched.
func (kr *Keyring) Authenticate(key string) *Principal {
	sum := sha256.Sum256([]byte(key))
	var found *Principal
	keys := kr.keys()
	for i := range keys {
		if subtle.ConstantTimeCompare(sum[:], keys[i].hash[:]) == 1 {
			found = keys[i].p
		}
	}
	return found
}

// Allows reports whether the key named caller may use tool: what a call
// that outlives its request (an async execution, a resumed step, a batch)
// is held to when it runs, since its principal is gone by then. A caller
// no configured key has (removed since) may use nothing; with no keys at
// all every caller is the local user and may use everything.
func (kr *Keyring) Allows(caller, tool string) bool {
	keys := kr.keys()
	if len(keys) == 0 {
		return true
	}
	for i := range keys {
		if keys[i].p.Name == caller {
			return keys[i].p.Allows(tool)
		}
	}
	return false
}

// Principal returns the principal of the configured key named name, or
// nil: a caller who presents no key but is known otherwise (toold -stdio's
// host, named by -stdio-key) acts with that key's tools and roles.
func (kr *Keyring) Principal(name string) *Principal {
	keys := kr.keys()
	for i := range keys {
		if keys[i].p.Name == name {
			return keys[i].p
		}
	}
	return nil
}

// Hash returns the hex SHA-256 of a key, as the config stores it.
func Hash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// NewKey returns a fresh random key: 32 bytes, hex, prefixed "toold_" so
// secret scanners can recognise it.
func NewKey() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "toold_" + hex.EncodeToString(b[:])
}

type ctxKey struct{}

// NewContext returns ctx carrying the authenticated caller, for handlers
// mounted behind toold's authentication that are not its own (the MCP
// transport).
func NewContext(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// FromContext returns the caller NewContext stored, or nil.
func FromContext(ctx context.Context) *Principal {
	p, _ := ctx.Value(ctxKey{}).(*Principal)
	return p
}
