package state

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Bucket is a KV bucket whose every operation is measured.
type Bucket struct {
	kv   jetstream.KeyValue
	m    *metrics
	name string
}

// ErrNotFound: no such key (or it expired).
var ErrNotFound = errors.New("not found")

// ErrConflict: the key exists (Create) or changed since it was read
// (Update); from Store.Publish with an expected last sequence, another
// writer appended first.
var ErrConflict = errors.New("conflict")

func (b *Bucket) done(op string, start time.Time, err error) error {
	switch {
	case err == nil:
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		err = ErrNotFound
	case errors.Is(err, jetstream.ErrKeyExists):
		err = ErrConflict
	default:
		err = classify(err)
	}
	b.m.observe(b.name+"_"+op, start, err)
	return err
}

// Get returns a key's value and revision.
func (b *Bucket) Get(ctx context.Context, key string) ([]byte, uint64, error) {
	start := time.Now()
	e, err := b.kv.Get(ctx, key)
	if err = b.done("get", start, err); err != nil {
		return nil, 0, err
	}
	return e.Value(), e.Revision(), nil
}

// Create stores a value only if the key does not exist (ErrConflict).
func (b *Bucket) Create(ctx context.Context, key string, value []byte) (uint64, error) {
	start := time.Now()
	rev, err := b.kv.Create(ctx, key, value)
	return rev, b.done("create", start, err)
}

// Update stores a value only if the key is still at revision
// (ErrConflict otherwise).
func (b *Bucket) Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error) {
	start := time.Now()
	rev, err := b.kv.Update(ctx, key, value, revision)
	return rev, b.done("update", start, err)
}

// Put stores a value whatever was there.
func (b *Bucket) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	start := time.Now()
	rev, err := b.kv.Put(ctx, key, value)
	return rev, b.done("put", start, err)
}

// Delete removes a key.
func (b *Bucket) Delete(ctx context.Context, key string) error {
	start := time.Now()
	return b.done("delete", start, b.kv.Delete(ctx, key))
}

// DeleteAt removes a key only if it is still at revision (ErrConflict
// otherwise): a writer that may have been overtaken takes back only what
// it wrote.
func (b *Bucket) DeleteAt(ctx context.Context, key string, revision uint64) error {
	start := time.Now()
	return b.done("delete", start, b.kv.Delete(ctx, key, jetstream.LastRevision(revision)))
}

// Watch sends the key's changes after the current value (which comes
// first) until ctx ends; the channel closes then.
func (b *Bucket) Watch(ctx context.Context, key string) (<-chan Entry, error) {
	start := time.Now()
	w, err := b.kv.Watch(ctx, key, jetstream.IgnoreDeletes())
	if err = b.done("watch", start, err); err != nil {
		return nil, err
	}
	out := make(chan Entry, 1)
	go func() {
		defer close(out)
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e == nil {
					continue // the end of the initial values
				}
				select {
				case out <- Entry{Value: e.Value(), Revision: e.Revision()}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}

// Entry is one value of a watched key.
type Entry struct {
	Value    []byte
	Revision uint64
}

// Keys lists the keys matching a filter (NATS wildcards: "a.*", "a.>").
func (b *Bucket) Keys(ctx context.Context, filter string) ([]string, error) {
	start := time.Now()
	l, err := b.kv.ListKeysFiltered(ctx, filter)
	if err != nil {
		return nil, b.done("keys", start, err)
	}
	defer l.Stop()
	var keys []string
	for k := range l.Keys() {
		keys = append(keys, k)
	}
	return keys, b.done("keys", start, ctx.Err())
}
