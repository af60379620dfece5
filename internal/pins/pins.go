// Package pins keeps the definitions of hosted MCP tools pinned in the
// state store, so that a server cannot change a tool behind the backs of
// the people who approved it (the "rug pull"). The first time toold sees
// a pinned server's tools it pins each one's definition (its canonical
// JSON and SHA-256); when the server later lists a different definition
// (after list_changed, a reconnection or a restart), the tool is held back
// — left out of the registry's snapshot — until a person with the admin
// role accepts the change, or refuses it to keep the tool out. A tool the
// server adds later is pinned as it comes, or held back the same way with
// pin_new: review.
//
// The pins live in one KV bucket (state.PinsBucket), one key per tool:
// every replica checks against the same pins, and a decision taken on one
// replica reaches the others through a watch, which has their servers list
// their tools again.
//
//	k := pins.New(store.Pins, log)
//	held, err := k.Admit(ctx, "jira", defs, false) // the tools to hold back
//	changes, err := k.Changes(ctx)                 // what waits for a person
//	err = k.Decide(ctx, "jira.delete", true, "", "alice") // accept it
package pins

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/toold/toold/internal/state"
	"github.com/toold/toold/internal/tools/upstream"
)

// Record is one tool's pin as the store keeps it.
type Record struct {
	Server string `json:"server"`
	Tool   string `json:"tool"`
	// Hash is the pinned definition's ("sha256:<hex>"); empty for a new
	// tool waiting for its first acceptance.
	Hash       string          `json:"hash,omitempty"`
	Definition json.RawMessage `json:"definition,omitempty"`
	PinnedAt   time.Time       `json:"pinned_at,omitzero"`
	// PinnedBy is who accepted the definition; empty when it was pinned
	// as first seen.
	PinnedBy string `json:"pinned_by,omitempty"`
	// Pending is the definition the server lists now, when it is not the
	// pinned one.
	Pending *Pending `json:"pending,omitempty"`
}

// Pending is a definition that waits for a person.
type Pending struct {
	Hash       string          `json:"hash"`
	Definition json.RawMessage `json:"definition"`
	SeenAt     time.Time       `json:"seen_at"`
	// RefusedBy is set once a person refused it: the tool stays out.
	RefusedBy string    `json:"refused_by,omitempty"`
	RefusedAt time.Time `json:"refused_at,omitzero"`
}

// Name is the tool's name as toold serves it.
func (r *Record) Name() string { return r.Server + "." + r.Tool }

// Keeper checks listings against the pins and records decisions.
type Keeper struct {
	b   *state.Bucket
	log *zap.Logger
	now func() time.Time
}

var _ upstream.Pinner = (*Keeper)(nil)

// New is a keeper of the pins in b (state.Store.Pins).
func New(b *state.Bucket, log *zap.Logger) *Keeper {
	if log == nil {
		log = zap.NewNop()
	}
	return &Keeper{b: b, log: log, now: time.Now}
}

// Hash is the hash a pin keeps of a canonical definition.
func Hash(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// key is a tool's key: its server (1-32 of [a-zA-Z0-9_-]) and its name on
// the server in hex (a name may hold characters a key may not).
func key(server, tool string) string { return server + "." + hex.EncodeToString([]byte(tool)) }

// maxAttempts bounds the retries of a write that lost a race to another
// replica's.
const maxAttempts = 5

// firstKey is a server's record of the listing toold saw first: its
// tools by name and hash. "first" is not hex, so no tool's key is it.
func firstKey(server string) string { return server + ".first" }

// Admit checks a server's listed tools against their pins (see
// upstream.Pinner). The first listing of a server is recorded as it is
// (one create, so of replicas listing it at once one wins), and its tools
// are pinned as they are, by whichever replica gets to each first.
func (k *Keeper) Admit(ctx context.Context, server string, defs []upstream.Definition, reviewNew bool) (map[string]string, error) {
	first, err := k.firstListing(ctx, server, defs)
	if err != nil {
		return nil, fmt.Errorf("the first listing of %s: %w", server, err)
	}
	held := map[string]string{}
	for _, d := range defs {
		pinNew := !reviewNew || first[d.Tool] == Hash(d.Canonical)
		why, err := k.admitOne(ctx, server, d, pinNew)
		if err != nil {
			return nil, fmt.Errorf("the pin of %s.%s: %w", server, d.Tool, err)
		}
		if why != "" {
			held[d.Tool] = why
		}
	}
	return held, nil
}

// firstListing is the tools of the server's first listing, by name, with
// their hashes: defs', if this is the first.
func (k *Keeper) firstListing(ctx context.Context, server string, defs []upstream.Definition) (map[string]string, error) {
	raw, _, err := k.b.Get(ctx, firstKey(server))
	if errors.Is(err, state.ErrNotFound) {
		first := make(map[string]string, len(defs))
		for _, d := range defs {
			first[d.Tool] = Hash(d.Canonical)
		}
		b, _ := json.Marshal(first)
		if _, err = k.b.Create(ctx, firstKey(server), b); err == nil {
			return first, nil
		}
		if !errors.Is(err, state.ErrConflict) {
			return nil, err
		}
		raw, _, err = k.b.Get(ctx, firstKey(server)) // another replica's, just made
	}
	if err != nil {
		return nil, err
	}
	var first map[string]string
	if err := json.Unmarshal(raw, &first); err != nil {
		return nil, fmt.Errorf("an unreadable record: %w", err)
	}
	return first, nil
}

// admitOne checks one tool; it returns why the tool is held back, or ""
// when it is served. pinNew says a tool without a pin is pinned as it is.
func (k *Keeper) admitOne(ctx context.Context, server string, d upstream.Definition, pinNew bool) (string, error) {
	h, kk := Hash(d.Canonical), key(server, d.Tool)
	for range maxAttempts {
		raw, rev, err := k.b.Get(ctx, kk)
		if errors.Is(err, state.ErrNotFound) {
			rec := Record{Server: server, Tool: d.Tool}
			if pinNew {
				rec.Hash, rec.Definition, rec.PinnedAt = h, d.Canonical, k.now().UTC()
			} else {
				rec.Pending = &Pending{Hash: h, Definition: d.Canonical, SeenAt: k.now().UTC()}
			}
			if _, err := k.b.Create(ctx, kk, encode(&rec)); errors.Is(err, state.ErrConflict) {
				continue // another replica pinned it first: check against theirs
			} else if err != nil {
				return "", err
			}
			return heldWhy(&rec), nil
		}
		if err != nil {
			return "", err
		}
		var rec Record
		if err := json.Unmarshal(raw, &rec); err != nil {
			return "", fmt.Errorf("an unreadable pin: %w", err)
		}
		next, changed := k.observe(rec, h, d.Canonical)
		if changed {
			if _, err := k.b.Update(ctx, kk, encode(&next), rev); errors.Is(err, state.ErrConflict) {
				continue
			} else if err != nil {
				return "", err
			}
		}
		return heldWhy(&next), nil
	}
	return "", errors.New("other replicas kept changing it; try again")
}

// observe is rec after the server listed the definition of hash h: the
// pinned one serves it (and drops a change it no longer lists); another
// becomes the pending change, unless it is that one already (which keeps
// its refusal, if it has one).
func (k *Keeper) observe(rec Record, h string, def json.RawMessage) (Record, bool) {
	switch {
	case rec.Hash == h && rec.Pending == nil:
		return rec, false
	case rec.Hash == h:
		rec.Pending = nil
		return rec, true
	case rec.Pending != nil && rec.Pending.Hash == h:
		return rec, false
	}
	rec.Pending = &Pending{Hash: h, Definition: def, SeenAt: k.now().UTC()}
	return rec, true
}

// heldWhy says why a tool is held back, or "" when it is served.
func heldWhy(rec *Record) string {
	switch {
	case rec.Pending == nil:
		return ""
	case rec.Pending.RefusedBy != "":
		return "an admin refused the definition its server lists now"
	case rec.Hash == "":
		return "it is new on its server, and an admin has not accepted it yet"
	}
	return "its server changed its definition since it was pinned, and an admin has not accepted the change yet"
}

func encode(rec *Record) []byte {
	b, _ := json.Marshal(rec) // plain data: cannot fail
	return b
}

// ErrNoChange: no change of the tool waits for a decision.
var ErrNoChange = errors.New("no change of this tool waits for a decision")

// ErrStale: the change is not the one the decision was about (the server
// changed the tool again meanwhile).
var ErrStale = errors.New("the tool changed again since the change was shown")

// Decide accepts (accept true: the pending definition becomes the pinned
// one, and the tool is served again) or refuses (the tool stays out) the
// pending change of the tool toold serves as name ("<server>.<tool>").
// hash, when set, must be the pending change's (what the person saw). by
// names who decided. Every replica's server lists its tools again.
func (k *Keeper) Decide(ctx context.Context, name string, accept bool, hash, by string) (*Record, error) {
	server, tool, ok := strings.Cut(name, ".")
	if !ok {
		return nil, ErrNoChange
	}
	kk := key(server, tool)
	for range maxAttempts {
		raw, rev, err := k.b.Get(ctx, kk)
		if errors.Is(err, state.ErrNotFound) {
			return nil, ErrNoChange
		}
		if err != nil {
			return nil, err
		}
		var rec Record
		if err := json.Unmarshal(raw, &rec); err != nil {
			return nil, fmt.Errorf("an unreadable pin: %w", err)
		}
		switch {
		case rec.Pending == nil:
			return nil, ErrNoChange
		case hash != "" && hash != rec.Pending.Hash:
			return nil, ErrStale
		}
		now := k.now().UTC()
		if accept {
			rec.Hash, rec.Definition, rec.PinnedAt, rec.PinnedBy, rec.Pending = rec.Pending.Hash, rec.Pending.Definition, now, by, nil
		} else {
			rec.Pending.RefusedBy, rec.Pending.RefusedAt = by, now
		}
		if _, err := k.b.Update(ctx, kk, encode(&rec), rev); errors.Is(err, state.ErrConflict) {
			continue
		} else if err != nil {
			return nil, err
		}
		return &rec, nil
	}
	return nil, errors.New("other replicas kept changing the pin; try again")
}

// Changes lists the changes that wait for a decision, and those refused,
// by tool name.
func (k *Keeper) Changes(ctx context.Context) ([]Change, error) {
	keys, err := k.b.Keys(ctx, ">")
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		return nil, err
	}
	out := []Change{}
	for _, kk := range keys {
		if strings.HasSuffix(kk, ".first") {
			continue
		}
		raw, _, err := k.b.Get(ctx, kk)
		if errors.Is(err, state.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var rec Record
		if err := json.Unmarshal(raw, &rec); err != nil {
			return nil, fmt.Errorf("an unreadable pin at %s: %w", kk, err)
		}
		if rec.Pending != nil {
			out = append(out, changeOf(&rec))
		}
	}
	slices.SortFunc(out, func(a, b Change) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Watch calls changed with the server of every pin changed after it
// began (by this replica or another), until ctx ends.
func (k *Keeper) Watch(ctx context.Context, changed func(server string)) error {
	ch, err := k.b.WatchAll(ctx, ">")
	if err != nil {
		return err
	}
	go func() {
		for e := range ch {
			if server, _, ok := strings.Cut(e.Key, "."); ok {
				changed(server)
			}
		}
	}()
	return nil
}
