package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Bucket is a KV bucket whose every operation is measured.
type Bucket struct {
	kv   jetstream.KeyValue
	m    *metrics
	name string
	// nc, on a replicated bucket, is the connection a Get asks the
	// stream's leader on (the JetStream API's message get, which only the
	// leader answers): any replica may answer a direct get, the client's
	// way, and a follower may not have applied the last write yet (a
	// record just created would read as missing: 404 for a 202's Location).
	nc *nats.Conn
	// js publishes a put with a TTL of its own (PutTTL).
	js jetstream.JetStream
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

// Stream is the name of the stream that holds the bucket's entries.
func (b *Bucket) Stream() string { return "KV_" + b.name }

// Get returns a key's value and revision, as the last write left it.
func (b *Bucket) Get(ctx context.Context, key string) ([]byte, uint64, error) {
	start := time.Now()
	if b.nc != nil {
		return b.leaderGet(ctx, key, start)
	}
	e, err := b.kv.Get(ctx, key)
	if err = b.done("get", start, err); err != nil {
		return nil, 0, err
	}
	return e.Value(), e.Revision(), nil
}

// leaderGet reads the key's last message from the stream's leader.
func (b *Bucket) leaderGet(ctx context.Context, key string, start time.Time) ([]byte, uint64, error) {
	value, rev, err := b.askLeader(ctx, key)
	if err = b.done("get", start, err); err != nil {
		return nil, 0, err
	}
	return value, rev, nil
}

// msgGet is the JetStream API's answer to a message get.
type msgGet struct {
	Error   *jetstream.APIError `json:"error"`
	Message *struct {
		Sequence uint64 `json:"seq"`
		Header   []byte `json:"hdrs"`
		Data     []byte `json:"data"`
	} `json:"message"`
}

// noMessage is the API's code for a subject with no message.
const noMessage = 10037

func (b *Bucket) askLeader(ctx context.Context, key string) ([]byte, uint64, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	req, _ := json.Marshal(map[string]string{"last_by_subj": "$KV." + b.name + "." + key})
	reply, err := b.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET.KV_"+b.name, req)
	if err != nil {
		return nil, 0, err
	}
	var got msgGet
	if err := json.Unmarshal(reply.Data, &got); err != nil {
		return nil, 0, fmt.Errorf("an unreadable answer to a message get: %w", err)
	}
	switch {
	case got.Error != nil && got.Error.ErrorCode == noMessage:
		return nil, 0, jetstream.ErrKeyNotFound
	case got.Error != nil:
		return nil, 0, got.Error
	case got.Message == nil:
		return nil, 0, errors.New("an empty answer to a message get")
	case removal(got.Message.Header):
		return nil, 0, jetstream.ErrKeyDeleted
	}
	return got.Message.Data, got.Message.Sequence, nil
}

// removal reports whether a KV message's headers make it a key's removal
// rather than a value: a delete, a purge, or a marker the server writes
// when a key's TTL or the bucket's age limit removes it (only buckets with
// limit markers have them), as the client's own Get reads them.
func removal(hdrs []byte) bool {
	if len(hdrs) == 0 {
		return false
	}
	h, err := nats.DecodeHeadersMsg(hdrs)
	if err != nil {
		return false
	}
	switch h.Get(kvOperation) {
	case "DEL", "PURGE":
		return true
	}
	return h.Get(jetstream.MarkerReasonHeader) != ""
}

// kvOperation is the header of a KV message that removes its key.
const kvOperation = "KV-Operation"

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
	return b.watch(ctx, key, 1)
}

// watch forwards the watcher's entries (deletions left out) until ctx
// ends; opts add to IgnoreDeletes (UpdatesOnly: no current values).
func (b *Bucket) watch(ctx context.Context, filter string, buffer int, opts ...jetstream.WatchOpt) (<-chan Entry, error) {
	start := time.Now()
	w, err := b.kv.Watch(ctx, filter, append([]jetstream.WatchOpt{jetstream.IgnoreDeletes()}, opts...)...)
	if err = b.done("watch", start, err); err != nil {
		return nil, err
	}
	out := make(chan Entry, buffer)
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
				case out <- Entry{Key: e.Key(), Value: e.Value(), Revision: e.Revision()}:
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
	// Key is the entry's key (WatchAll's filter may match many).
	Key      string
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

// kvOpts are what tells toold's KV buckets apart beyond their name,
// description and age limit.
type kvOpts struct {
	// keyTTL gives the bucket limit markers, which per-key TTLs need
	// (CreateTTL, a message TTL): nats-server 2.11 or later.
	keyTTL bool
	// leaderReads has a replicated bucket's reads ask the stream's
	// leader, so what one replica wrote another reads back at once.
	leaderReads bool
}

// kvBucket creates or updates one of toold's KV buckets: file storage,
// the store's replicas, one value per key.
func (s *Store) kvBucket(ctx context.Context, cfg jetstream.KeyValueConfig, o kvOpts) (*Bucket, error) {
	cfg.Storage, cfg.Replicas, cfg.History = jetstream.FileStorage, s.opts.Replicas, 1
	if o.keyTTL {
		cfg.LimitMarkerTTL = time.Second
	}
	kv, err := s.js.CreateOrUpdateKeyValue(ctx, cfg)
	if err != nil {
		if errors.Is(err, jetstream.ErrLimitMarkerTTLNotSupported) {
			err = fmt.Errorf("%w (per-key TTLs need nats-server 2.11 or later)", err)
		}
		return nil, fmt.Errorf("bucket %s: %w", cfg.Bucket, err)
	}
	b := &Bucket{kv: kv, m: s.metrics, name: cfg.Bucket, js: s.js}
	if o.leaderReads && s.opts.Replicas > 1 {
		b.nc = s.nc
	}
	return b, nil
}
