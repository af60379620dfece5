package events

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toold/toold/internal/state"
)

// Line is one line of a stream message with its position.
type Line struct {
	ID   ID
	Data []byte
}

// Position says where a subscription starts.
type Position struct {
	// After resumes after this id (Last-Event-ID); zero starts at
	// FromStart's choice.
	After ID
	// FromStart, without After, replays everything retained; otherwise
	// only what arrives from now on.
	FromStart bool
	// Since, without After, starts at what was stored at or after it
	// (the calls of the last minutes, for a page that just opened).
	Since time.Time
	// Until, when not zero, ends the subscription after the message of
	// that sequence (a read of what the stream held, rather than a tail).
	Until uint64
}

// Subscribe reads the lines of a stream's messages on subjects from pos,
// calling yield for each until yield returns false, ctx ends or the store
// fails. It holds an ordered consumer (no state on the server beyond the
// subscription), so any replica serves any client.
func Subscribe(ctx context.Context, st *state.Store, stream string, subjects []string, pos Position, yield func(Line) bool) error {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: subjects, DeliverPolicy: jetstream.DeliverNewPolicy}
	switch {
	case !pos.After.IsZero():
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, pos.After.Seq
	case !pos.Since.IsZero():
		since := pos.Since
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
	case pos.FromStart:
		cfg.DeliverPolicy = jetstream.DeliverAllPolicy
	}
	start := time.Now()
	cons, err := st.JetStream().OrderedConsumer(ctx, stream, cfg)
	st.Observe("subscribe", start, err)
	if err != nil {
		return err
	}
	it, err := cons.Messages()
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	defer it.Stop()
	for {
		msg, err := it.Next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return ctx.Err()
			}
			return err
		}
		meta, err := msg.Metadata()
		if err != nil {
			continue
		}
		for i, line := range splitLines(msg.Data()) {
			id := ID{Seq: meta.Sequence.Stream, Line: i}
			if !id.After(pos.After) {
				continue
			}
			if !yield(Line{ID: id, Data: line}) {
				return nil
			}
		}
		if pos.Until != 0 && meta.Sequence.Stream >= pos.Until {
			return nil
		}
	}
}

// Filter selects activity events.
type Filter struct {
	Tool, Caller, Status string
}

// Match reports whether ev passes the filter (empty fields match all).
func (f Filter) Match(ev *Event) bool {
	return (f.Tool == "" || f.Tool == ev.Tool) && (f.Caller == "" || f.Caller == ev.Caller) &&
		(f.Status == "" || f.Status == ev.Status || f.Status == ev.Type)
}

// Activity subscribes to every replica's events (calls' start, end and
// error; async executions' acceptance and output), filtered.
func Activity(ctx context.Context, st *state.Store, pos Position, f Filter, yield func(Event) bool) error {
	return Subscribe(ctx, st, state.EventsStream, []string{ActivitySubject}, pos, func(l Line) bool {
		var ev Event
		if json.Unmarshal(l.Data, &ev) != nil || !f.Match(&ev) {
			return true
		}
		ev.ID = l.ID.String()
		return yield(ev)
	})
}

// Execution subscribes to one execution's events, from its first unless
// pos says otherwise.
func Execution(ctx context.Context, st *state.Store, id string, pos Position, yield func(Event) bool) error {
	return Subscribe(ctx, st, state.EventsStream, []string{ExecutionSubject(id)}, pos, func(l Line) bool {
		var ev Event
		if json.Unmarshal(l.Data, &ev) != nil {
			return true
		}
		ev.ID = l.ID.String()
		return yield(ev)
	})
}
