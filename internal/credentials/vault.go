package credentials

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/toold/toold/internal/auth"
)

// KV is where sealed records live: the state store's credentials bucket
// (a *state.Bucket), shared by every replica. Its errors are told apart
// with Options.NotFound and Options.Conflict (the store's own sentinels),
// so this package needs nothing of the store but these methods.
type KV interface {
	Get(ctx context.Context, key string) ([]byte, uint64, error)
	Create(ctx context.Context, key string, value []byte) (uint64, error)
	CreateTTL(ctx context.Context, key string, value []byte, ttl time.Duration) (uint64, error)
	Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error)
	Put(ctx context.Context, key string, value []byte) (uint64, error)
	Delete(ctx context.Context, key string) error
	DeleteAt(ctx context.Context, key string, revision uint64) error
	Keys(ctx context.Context, filter string) ([]string, error)
}

// Options configure a Vault.
type Options struct {
	KV KV
	// NotFound and Conflict are the store's errors for a missing key and
	// for a write that lost a race (state.ErrNotFound, state.ErrConflict).
	NotFound, Conflict error
	// Keys seal and open every record.
	Keys *Keyring
	// Local lets the anonymous caller (no keys, stdio) keep credentials as
	// the principal "local"; off, it is refused (a server listening beyond
	// loopback must not let every anonymous caller share one person's
	// credentials).
	Local bool
	// CacheFor bounds how long a replica keeps an opened record in memory
	// (default 15s): a change made on another replica is seen within it;
	// one made here at once.
	CacheFor time.Duration
	// OnUse, when set, is told each time a principal's credential is used
	// for an outbound request (the audit log's "credential_use"), by name
	// only.
	OnUse func(ctx context.Context, who *auth.Identity, kind, name string)
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Vault keeps each principal's credentials — secrets they set, tokens of
// the OAuth connections they made — sealed in the state store. It is safe
// for concurrent use.
type Vault struct {
	opts  Options
	now   func() time.Time
	mu    sync.Mutex
	cache map[string]cached
}

type cached struct {
	plain []byte
	rev   uint64
	until time.Time
}

var _ Resolver = (*Vault)(nil)

// Kinds of record.
const (
	KindSecret     = "secret" // a value the principal set (PUT /credentials/{name})
	KindOAuth      = "oauth"  // the tokens of an OAuth connection
	kindFlow       = "flow"   // an authorization in progress
	kindClient     = "client" // a dynamically registered client
	kindLister     = "lister" // whose connection lists a per-user server
	kindCheck      = "check"  // proves the key opens the store
	checkPrincipal = "toold"
)

// prefixes of the keys in the bucket, one letter per kind.
var prefix = map[string]string{KindSecret: "s", KindOAuth: "o", kindFlow: "f", kindClient: "r", kindLister: "l", kindCheck: "k"}

// New checks that the keyring opens what the store holds: the check
// record, which the first start seals and every later start opens (sealed
// again with the current key after a rotation). A key that does not open
// it is refused, so toold never starts with a wrong key and writes records
// nobody can read.
func New(ctx context.Context, o Options) (*Vault, error) {
	if o.KV == nil || o.Keys == nil || o.NotFound == nil || o.Conflict == nil {
		return nil, errors.New("credentials: a store, its errors and a keyring are required")
	}
	if o.CacheFor == 0 {
		o.CacheFor = 15 * time.Second
	}
	v := &Vault{opts: o, now: o.Now, cache: map[string]cached{}}
	if v.now == nil {
		v.now = time.Now
	}
	if err := v.check(ctx); err != nil {
		return nil, err
	}
	if len(o.Keys.previous) > 0 {
		if _, err := v.reseal(ctx); err != nil {
			return nil, fmt.Errorf("credentials: sealing records again with the new key: %w", err)
		}
	}
	return v, nil
}

// ErrWrongKey is a store whose credentials were sealed with a key the
// keyring does not hold.
var ErrWrongKey = errors.New("credentials.key does not open the credentials in the state store: " +
	"it is not the key they were sealed with (after a rotation, keep the old key in credentials.previous_keys)")

func (v *Vault) check(ctx context.Context) error {
	const name = "v1"
	plain, _, err := v.get(ctx, kindCheck, checkPrincipal, name)
	switch {
	case errors.Is(err, v.opts.NotFound):
		_, err = v.opts.KV.Create(ctx, v.key(kindCheck, checkPrincipal, name), v.opts.Keys.Seal(kindCheck, checkPrincipal, name, []byte("ok")))
		if errors.Is(err, v.opts.Conflict) {
			return v.check(ctx) // another replica made it at the same moment
		}
		return err
	case errors.Is(err, ErrSealed):
		return ErrWrongKey
	case err != nil:
		return err
	case string(plain) != "ok":
		return ErrWrongKey
	}
	return nil
}

// Local is the name of the anonymous caller's vault: the one person using
// a toold without credentials (no keys, stdio).
const Local = "local"

// ErrAnonymous refuses the anonymous caller's credentials on a toold
// whose listener reaches beyond loopback.
var ErrAnonymous = errors.New("per-user credentials need a named caller: this toold listens beyond loopback without keys, so " +
	"anonymous callers are anyone who reaches it (configure auth.keys or auth.oauth)")

// Principal is the vault's name for who: a key's holder, a token's
// subject at its issuer, or for the anonymous caller (nil) "local". The
// kind is part of it, so no key can be named into another's vault.
func Principal(who *auth.Identity) string {
	if who == nil {
		return auth.KindAnonymous + ":" + Local
	}
	return who.Kind + ":" + who.Name
}

// DisplayName is who as people read it: the identity's name, or "local".
func DisplayName(who *auth.Identity) string {
	if who == nil {
		return Local
	}
	return who.Name
}

// principal is Principal, refusing the anonymous caller unless Local.
func (v *Vault) principal(who *auth.Identity) (string, error) {
	if who == nil && !v.opts.Local {
		return "", ErrAnonymous
	}
	return Principal(who), nil
}

// key is a record's key in the bucket: its kind's letter, the principal
// and the name, each base64url (letters the store's keys allow; names
// hold dots, the store's separator).
func (v *Vault) key(kind, principal, name string) string {
	return prefix[kind] + "." + enc(principal) + "." + enc(name)
}

func enc(s string) string {
	if s == "" {
		return "_"
	}
	return base64.RawURLEncoding.EncodeToString([]byte(s))
}

func dec(s string) (string, bool) {
	if s == "_" {
		return "", true
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	return string(b), err == nil
}

// get opens a record, from the cache when it is fresh.
func (v *Vault) get(ctx context.Context, kind, principal, name string) ([]byte, uint64, error) {
	k := v.key(kind, principal, name)
	now := v.now()
	v.mu.Lock()
	c, ok := v.cache[k]
	v.mu.Unlock()
	if ok && now.Before(c.until) {
		return c.plain, c.rev, nil
	}
	sealed, rev, err := v.opts.KV.Get(ctx, k)
	if err != nil {
		v.forget(k)
		return nil, 0, err
	}
	plain, stale, err := v.opts.Keys.Open(kind, principal, name, sealed)
	if err != nil {
		return nil, 0, err
	}
	if stale { // rotation: seal it again with the current key, if nobody changed it meanwhile
		if r, err := v.opts.KV.Update(ctx, k, v.opts.Keys.Seal(kind, principal, name, plain), rev); err == nil {
			rev = r
		}
	}
	if kind != kindFlow && kind != kindCheck {
		v.remember(k, plain, rev, now)
	}
	return plain, rev, nil
}

func (v *Vault) remember(k string, plain []byte, rev uint64, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.cache) > 100_000 { // bounded: a flood of principals cannot grow it without end
		clear(v.cache)
	}
	v.cache[k] = cached{plain: plain, rev: rev, until: now.Add(v.opts.CacheFor)}
}

func (v *Vault) forget(k string) {
	v.mu.Lock()
	delete(v.cache, k)
	v.mu.Unlock()
}

// put seals and stores a record: created when rev is 0 and create is set,
// updated at rev when rev is set (Conflict if it moved), else written
// whatever was there.
func (v *Vault) put(ctx context.Context, kind, principal, name string, plain []byte, rev uint64, create bool) (uint64, error) {
	k := v.key(kind, principal, name)
	sealed := v.opts.Keys.Seal(kind, principal, name, plain)
	var err error
	var r uint64
	switch {
	case rev != 0:
		r, err = v.opts.KV.Update(ctx, k, sealed, rev)
	case create:
		r, err = v.opts.KV.Create(ctx, k, sealed)
	default:
		r, err = v.opts.KV.Put(ctx, k, sealed)
	}
	v.forget(k)
	if err == nil && kind != kindFlow {
		v.remember(k, plain, r, v.now())
	}
	return r, err
}

func (v *Vault) del(ctx context.Context, kind, principal, name string) error {
	k := v.key(kind, principal, name)
	v.forget(k)
	err := v.opts.KV.Delete(ctx, k)
	if errors.Is(err, v.opts.NotFound) {
		return nil
	}
	return err
}

// names lists the names of a principal's records of a kind.
func (v *Vault) names(ctx context.Context, kind, principal string) ([]string, error) {
	return v.keyPart(ctx, prefix[kind]+"."+enc(principal)+".*", 2)
}

// holders lists the principals holding a record of a kind under name.
func (v *Vault) holders(ctx context.Context, kind, name string) ([]string, error) {
	return v.keyPart(ctx, prefix[kind]+".*."+enc(name), 1)
}

// keyPart lists, sorted, the decoded part i of each key (kind.principal.name)
// matching pattern; a key of another shape is passed over.
func (v *Vault) keyPart(ctx context.Context, pattern string, i int) ([]string, error) {
	keys, err := v.opts.KV.Keys(ctx, pattern)
	if err != nil && !errors.Is(err, v.opts.NotFound) {
		return nil, err
	}
	var out []string
	for _, k := range keys {
		parts := strings.Split(k, ".")
		if len(parts) != 3 {
			continue
		}
		if s, ok := dec(parts[i]); ok {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out, nil
}

// namePattern is what a credential's name may be: what ${user:name} can
// spell, and what a URL path segment carries as is.
var namePattern = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,64}$`)

// ValidName reports whether name can name a credential.
func ValidName(name string) bool { return namePattern.MatchString(name) }

// ErrMissing is a principal without the credential asked for.
var ErrMissing = errors.New("credentials: the principal has no such credential")

// Secret is a value a principal stored, as GET /credentials lists it:
// never the value.
type Secret struct {
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

type secretRecord struct {
	Value   []byte    `json:"value"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
}

// MaxSecretBytes bounds a stored value.
const MaxSecretBytes = 16 << 10

// PutSecret stores who's secret under name, replacing a previous value.
func (v *Vault) PutSecret(ctx context.Context, who *auth.Identity, name string, value []byte) (Secret, error) {
	p, err := v.principal(who)
	if err != nil {
		return Secret{}, err
	}
	if !ValidName(name) {
		return Secret{}, fmt.Errorf("credentials: %q is not a credential name (1-64 of a-z A-Z 0-9 _ . -)", name)
	}
	if len(value) == 0 || len(value) > MaxSecretBytes {
		return Secret{}, fmt.Errorf("credentials: a value is 1 to %d bytes", MaxSecretBytes)
	}
	now := v.now().UTC()
	rec := secretRecord{Value: value, Created: now, Updated: now}
	if old, _, err := v.get(ctx, KindSecret, p, name); err == nil {
		var prev secretRecord
		if json.Unmarshal(old, &prev) == nil && !prev.Created.IsZero() {
			rec.Created = prev.Created
		}
	}
	plain, _ := json.Marshal(rec)
	if _, err := v.put(ctx, KindSecret, p, name, plain, 0, false); err != nil {
		return Secret{}, err
	}
	return Secret{Name: name, CreatedAt: rec.Created, UpdatedAt: rec.Updated}, nil
}

// Secrets lists who's secrets: names and dates.
func (v *Vault) Secrets(ctx context.Context, who *auth.Identity) ([]Secret, error) {
	p, err := v.principal(who)
	if err != nil {
		return nil, err
	}
	names, err := v.names(ctx, KindSecret, p)
	if err != nil {
		return nil, err
	}
	out := []Secret{}
	for _, n := range names {
		plain, _, err := v.get(ctx, KindSecret, p, n)
		if errors.Is(err, v.opts.NotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var rec secretRecord
		if json.Unmarshal(plain, &rec) == nil {
			out = append(out, Secret{Name: n, CreatedAt: rec.Created, UpdatedAt: rec.Updated})
		}
	}
	return out, nil
}

// DeleteSecret forgets who's secret; false when there was none.
func (v *Vault) DeleteSecret(ctx context.Context, who *auth.Identity, name string) (bool, error) {
	p, err := v.principal(who)
	if err != nil {
		return false, err
	}
	if _, _, err := v.get(ctx, KindSecret, p, name); errors.Is(err, v.opts.NotFound) {
		return false, nil
	}
	return true, v.del(ctx, KindSecret, p, name)
}

// Resolve is who's secret named name, for the outbound request being made
// now: ErrMissing when they have none, ErrAnonymous for a refused
// anonymous caller.
func (v *Vault) Resolve(ctx context.Context, who *auth.Identity, name string) ([]byte, error) {
	p, err := v.principal(who)
	if err != nil {
		return nil, err
	}
	plain, _, err := v.get(ctx, KindSecret, p, name)
	if errors.Is(err, v.opts.NotFound) {
		return nil, ErrMissing
	}
	if err != nil {
		return nil, err
	}
	var rec secretRecord
	if err := json.Unmarshal(plain, &rec); err != nil {
		return nil, fmt.Errorf("credentials: a stored record is malformed: %w", err)
	}
	if v.opts.OnUse != nil {
		v.opts.OnUse(ctx, who, KindSecret, name)
	}
	return rec.Value, nil
}

// reseal seals again with the current key every record a previous key
// sealed, so that once every replica runs with the new key the old one
// can leave credentials.previous_keys. Authorizations in progress are left
// to expire (writing them again would drop their TTL).
func (v *Vault) reseal(ctx context.Context) (int, error) {
	keys, err := v.opts.KV.Keys(ctx, ">")
	if err != nil && !errors.Is(err, v.opts.NotFound) {
		return 0, err
	}
	kinds := map[string]string{}
	for k, p := range prefix {
		kinds[p] = k
	}
	n := 0
	for _, k := range keys {
		parts := strings.Split(k, ".")
		if len(parts) != 3 || kinds[parts[0]] == "" || kinds[parts[0]] == kindFlow {
			continue
		}
		principal, ok1 := dec(parts[1])
		name, ok2 := dec(parts[2])
		if !ok1 || !ok2 {
			continue
		}
		kind := kinds[parts[0]]
		sealed, rev, err := v.opts.KV.Get(ctx, k)
		if err != nil {
			continue // gone meanwhile
		}
		plain, stale, err := v.opts.Keys.Open(kind, principal, name, sealed)
		if err != nil || !stale {
			continue
		}
		if _, err := v.opts.KV.Update(ctx, k, v.opts.Keys.Seal(kind, principal, name, plain), rev); err == nil {
			n++
		}
	}
	return n, nil
}
