package state

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ReadSince calls yield with each message of stream stored at or after
// since (by the server's clock), up to the stream's last message when the
// read began; it stops early when yield returns false. A recovery's scan
// of a few seconds of a stream (internal/executions/recovery.go): an
// ordered consumer, fetched in batches, so no consumer is left on the
// server and a stream whose tail was removed meanwhile ends the read
// instead of holding it.
func (s *Store) ReadSince(ctx context.Context, stream string, since time.Time, yield func(jetstream.Msg) bool) error {
	start := time.Now()
	err := s.readSince(ctx, stream, since, yield)
	s.metrics.observe("read_since", start, err)
	return err
}

func (s *Store) readSince(ctx context.Context, stream string, since time.Time, yield func(jetstream.Msg) bool) error {
	st, err := s.js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil // nothing written yet
	}
	if err != nil {
		return classify(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return classify(err)
	}
	if info.State.Msgs == 0 || info.State.LastTime.Before(since) {
		return nil
	}
	end := info.State.LastSeq
	cons, err := s.js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &since})
	if err != nil {
		return classify(err)
	}
	for {
		batch, err := cons.Fetch(256, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return classify(err)
		}
		got := 0
		for msg := range batch.Messages() {
			got++
			meta, err := msg.Metadata()
			if err != nil {
				continue
			}
			if !yield(msg) || meta.Sequence.Stream >= end || meta.NumPending == 0 {
				return nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
			return classify(err)
		}
		if got == 0 {
			return ctx.Err() // nothing more since the read began
		}
	}
}
