package state

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
)

// PinsBucket holds the pinned definitions of hosted MCP tools, one key
// per tool ("<server>.<tool, hex>"), kept until changed: every replica
// checks its upstreams' listings against the same pins, and an admin's
// decision on one replica reaches the others by a watch.
const PinsBucket = "toold_pins"

func (s *Store) pinsBucket(ctx context.Context) (*Bucket, error) {
	return s.kvBucket(ctx, jetstream.KeyValueConfig{Bucket: PinsBucket, Description: "toold pinned definitions of hosted MCP tools"},
		kvOpts{leaderReads: true})
}

// WatchAll sends every change of the keys matching filter (NATS wildcards)
// made after the watch began, with its key, until ctx ends; the channel
// closes then. Deletions are not sent.
func (b *Bucket) WatchAll(ctx context.Context, filter string) (<-chan Entry, error) {
	return b.watch(ctx, filter, 16, jetstream.UpdatesOnly())
}
