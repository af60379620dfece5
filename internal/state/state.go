// Package state is toold's shared state: NATS JetStream, either a server
// embedded in the process (the default: one machine, a directory of its
// own) or an external cluster every replica connects to (state.nats.url).
// Both take the same code path: a nats.go connection and its jetstream
// client. Open creates the buckets and streams the rest of toold uses, with
// retention limits from the configuration, and fails with a message that
// says what to fix when the store cannot be reached or written.
//
// What lives here:
//
//	KV  toold_executions     one record per execution, kept for Retention
//	KV  toold_idempotency    Idempotency-Key and Toold-Turn claims and answers
//	KV  toold_confirmations  confirmation tokens already used, each kept until
//	                         it expires (per-key TTL): no replica accepts one twice
//	KV  toold_pins           hosted MCP tools' pinned definitions (pins.go)
//	KV  toold_sessions_revoked  console sessions signed out, each kept until it
//	                         would have expired (per-key TTL): every replica refuses them
//	KV  toold_sessions_tokens  console sessions' refresh tokens, sealed by
//	                         internal/oauth, each kept until its session ends (per-key TTL)
//	KV  toold_credentials    principals' credentials and OAuth tokens, sealed
//	                         (AES-256-GCM, internal/credentials); no age limit
//	OBJ toold_artifacts      results over their tool's budget, kept whole for
//	                         state.artifacts.retention (artifacts.go)
//	    TOOLD_WORK           the queue of accepted async executions
//	    TOOLD_TIMERS         each waiting execution's timer, a message the
//	                         server schedules (nats-server 2.12 or later):
//	                         it fires once, on toold.timer.due, when the
//	                         wait expires
//	    TOOLD_EVENTS         activity and per-execution events (toold.events.>)
//	    TOOLD_AUDIT          the signed, hash-chained audit log (toold.audit);
//	                         no message can be deleted nor the stream purged
//	                         (deny_delete, deny_purge: the server refuses to
//	                         clear them on an existing stream)
//
// The embedded server listens for network clients only when asked
// (Listen), and then only with credentials (see auth.go).
package state

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Names of the buckets and streams, and the subjects toold publishes on.
const (
	ExecutionsBucket  = "toold_executions"
	IdempotencyBucket = "toold_idempotency"
	// WaitsBucket indexes the executions that wait (for a subtask, an
	// input or an approval) by id, so approvers can list them without
	// reading every record.
	WaitsBucket = "toold_waits"
	WorkStream  = "TOOLD_WORK"
	WorkSubject = "toold.work"
	// TimersStream holds one scheduled message per timer (a wait's
	// expiry, an execution's lease) on TimerSubject + its execution id;
	// the server publishes it on TimerDueSubject when it is due.
	TimersStream    = "TOOLD_TIMERS"
	TimerSubject    = "toold.timer.at."
	TimerDueSubject = "toold.timer.due"
	EventsStream    = "TOOLD_EVENTS"
	EventsSubjects  = "toold.events.>"
	AuditStream     = "TOOLD_AUDIT"
	AuditSubject    = "toold.audit"
	// CancelSubject carries cancellation requests to whichever replica
	// runs an execution (core NATS: a replica that misses one sees the
	// request in the record).
	CancelSubject = "toold.cancel"
	// DoneSubject announces that an execution ended, to whichever replica
	// has a client waiting for it (core NATS: a waiter also polls).
	DoneSubject = "toold.done"
)

// Options configure the store. Zero durations and sizes take the defaults.
type Options struct {
	// URL of an external NATS server or cluster (comma-separated seeds);
	// empty embeds a server storing in Dir.
	URL string
	// Credentials is a NATS .creds file (JWT and NKey seed); User and
	// Password, Token, or an NKey seed file are the alternatives. For the
	// embedded server with Listen they are what every client, this
	// process included, must present.
	Credentials    string
	User, Password string
	Token          string
	NKeySeedFile   string
	// TLS secures the connection (see TLS for each side's files).
	TLS TLS
	Dir string
	// Listen, for the embedded server, also accepts NATS clients on this
	// host:port (other replicas, the nats CLI, toold audit while toold
	// runs), and requires credentials then; empty accepts none: the
	// embedded server has no network listener.
	Listen string
	// MaxStore bounds the embedded server's disk use (default: the events
	// and audit limits plus 1 GiB).
	MaxStore int64
	// Replicas of each stream in a clustered NATS (default 1).
	Replicas int
	// Retention keeps execution records (default 24h).
	Retention time.Duration
	// IdempotencyTTL keeps idempotency keys and their answers (default 24h).
	IdempotencyTTL time.Duration
	// EventsMaxAge and EventsMaxBytes bound the events stream (24h, 256 MiB).
	EventsMaxAge   time.Duration
	EventsMaxBytes int64
	// AuditMaxAge and AuditMaxBytes bound the audit stream (720h, 1 GiB).
	AuditMaxAge   time.Duration
	AuditMaxBytes int64
	// ArtifactsRetention and ArtifactsMaxBytes bound the artifacts'
	// object store (results kept whole; DefaultArtifactsRetention,
	// DefaultArtifactsMaxBytes, or with MaxStore set a quarter of what
	// the events and audit limits leave of it, if that is less).
	ArtifactsRetention time.Duration
	ArtifactsMaxBytes  int64
	// artifactsDefaulted says ArtifactsMaxBytes is the default's, not
	// the operator's (see provision).
	artifactsDefaulted bool
	// Name identifies this process to the NATS server (the replica name).
	Name       string
	Logger     *zap.Logger
	Registerer prometheus.Registerer
	// ConnectTimeout bounds start-up's wait for the store (default 10s).
	ConnectTimeout time.Duration
	// Existing opens the store as the replicas made it: no bucket or
	// stream is created or changed, so a command that only reads it
	// (toold audit) cannot rewrite the replicas' limits or replica count
	// with its own configuration's. The buckets are nil then.
	Existing bool
}

func (o *Options) defaults() {
	o.Replicas = cmp.Or(o.Replicas, 1)
	o.Retention = cmp.Or(o.Retention, 24*time.Hour)
	o.IdempotencyTTL = cmp.Or(o.IdempotencyTTL, 24*time.Hour)
	o.EventsMaxAge = cmp.Or(o.EventsMaxAge, 24*time.Hour)
	o.EventsMaxBytes = cmp.Or(o.EventsMaxBytes, 256<<20)
	o.AuditMaxAge = cmp.Or(o.AuditMaxAge, 720*time.Hour)
	o.AuditMaxBytes = cmp.Or(o.AuditMaxBytes, 1<<30)
	o.ArtifactsRetention = cmp.Or(o.ArtifactsRetention, DefaultArtifactsRetention)
	if o.ArtifactsMaxBytes == 0 {
		o.artifactsDefaulted = true
		o.ArtifactsMaxBytes = DefaultArtifactsMaxBytes
		if o.MaxStore != 0 {
			// A store bounded by the operator keeps fitting what it fitted
			// before artifacts: they take at most a quarter of the room
			// the events and audit limits leave (byte limits reserve).
			room := o.MaxStore - o.EventsMaxBytes - o.AuditMaxBytes
			o.ArtifactsMaxBytes = min(DefaultArtifactsMaxBytes, max(room/4, 64<<10))
		}
	}
	// Streams with a byte limit reserve it: the default leaves 1 GiB
	// besides for execution records, idempotency answers and the queue.
	o.MaxStore = cmp.Or(o.MaxStore, o.EventsMaxBytes+o.AuditMaxBytes+o.ArtifactsMaxBytes+1<<30)
	o.ConnectTimeout = cmp.Or(o.ConnectTimeout, 10*time.Second)
	o.Name = cmp.Or(o.Name, "toold")
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
}

// Store is an open connection to JetStream with toold's buckets and streams.
type Store struct {
	opts     Options
	log      *zap.Logger
	embedded *server.Server
	unlock   func()
	// closing is set by Close: the disconnection it causes is no news.
	closing atomic.Bool
	nc      *nats.Conn
	js      jetstream.JetStream
	work    jetstream.Stream
	timers  jetstream.Stream
	metrics *metrics
	// Executions, Idempotency and Waits are the KV buckets.
	Executions  *Bucket
	Idempotency *Bucket
	Waits       *Bucket
	// confirmations holds used confirmation tokens (see SpentTokens).
	confirmations *Bucket
	// Pins holds hosted tools' pinned definitions (pins.go).
	Pins *Bucket
	// revokedSessions holds signed-out console sessions (RevokedSessions).
	revokedSessions *Bucket
	// sessionTokens holds console sessions' refresh tokens, sealed
	// (SessionTokens).
	sessionTokens *Bucket
	// Credentials holds each principal's credentials, sealed (see
	// internal/credentials): secrets, OAuth tokens, authorizations in
	// progress (with a TTL of their own).
	Credentials *Bucket
	// artifacts holds results kept whole (see Artifacts).
	artifacts jetstream.ObjectStore
}

// Open starts the embedded server (or connects to Options.URL) and creates
// or updates every bucket and stream.
func Open(ctx context.Context, o Options) (*Store, error) {
	o.defaults()
	s := &Store{opts: o, log: o.Logger, metrics: newMetrics(o.Registerer)}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	var err error
	if o.URL == "" {
		if err = s.embed(); err != nil {
			return nil, err
		}
	}
	if s.nc, err = s.connect(); err != nil {
		return nil, err
	}
	// An async publish whose answer never comes (the connection moved)
	// fails after the timeout rather than holding its caller.
	if s.js, err = jetstream.New(s.nc, jetstream.WithPublishAsyncTimeout(o.ConnectTimeout)); err != nil {
		return nil, err
	}
	if o.Existing {
		s.metrics.connected.Set(1)
		ok = true
		return s, nil
	}
	ctx, cancel := context.WithTimeout(ctx, o.ConnectTimeout)
	defer cancel()
	start := time.Now()
	err = s.provisionPatiently(ctx)
	s.metrics.observe("provision", start, err)
	if err != nil {
		return nil, fmt.Errorf("state: creating toold's buckets and streams on %s: %w", s.where(), err)
	}
	s.metrics.connected.Set(1)
	ok = true
	return s, nil
}

// where names the store for messages.
func (s *Store) where() string {
	if s.opts.URL != "" {
		return "NATS at " + redactURL(s.opts.URL)
	}
	return "the embedded NATS server in " + s.opts.Dir
}

// redactURL drops a password from a nats://user:pass@host URL.
func redactURL(u string) string {
	var out []string
	for _, part := range strings.Split(u, ",") {
		if at := strings.LastIndex(part, "@"); at >= 0 {
			scheme, _, found := strings.Cut(part, "://")
			if found {
				part = scheme + "://[credentials]" + part[at:]
			} else {
				part = "[credentials]" + part[at:]
			}
		}
		out = append(out, part)
	}
	return strings.Join(out, ",")
}

func (s *Store) connect() (*nats.Conn, error) {
	o := s.opts
	opts := []nats.Option{nats.Name(o.Name), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond),
		nats.RetryOnFailedConnect(false), nats.Timeout(o.ConnectTimeout),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			s.metrics.connected.Set(0)
			if s.closing.Load() {
				return
			}
			s.log.Warn("state: lost the connection to NATS; reconnecting", zap.Error(err))
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			s.metrics.connected.Set(1)
			s.metrics.reconnects.Inc()
			s.log.Info("state: reconnected to NATS", zap.String("server", nc.ConnectedUrlRedacted()))
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			s.log.Warn("state: NATS error", zap.Error(err))
		}),
	}
	auth, err := o.clientAuth(s.embedded != nil)
	if err != nil {
		return nil, err
	}
	opts = append(opts, auth...)
	if s.embedded != nil {
		opts = append(opts, nats.InProcessServer(s.embedded))
	}
	nc, err := nats.Connect(o.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("state: cannot reach %s: %w (check state.nats.url, that the server runs and that its credentials are right)", s.where(), err)
	}
	return nc, nil
}

// provisionPatiently provisions, trying again while the cluster cannot
// place a stream yet: a node the meta leader does not see online (toold
// and the cluster deployed together, a node restarting, one briefly taken
// for offline) or a cluster between leaders. Provisioning is idempotent,
// so what a try created stays. A store that stays so fails start-up when
// ctx ends (ConnectTimeout), with the last refusal.
func (s *Store) provisionPatiently(ctx context.Context) error {
	err := Retry(ctx, s.opts.ConnectTimeout, func(err error) bool {
		if !placementPending(err) {
			return false
		}
		s.log.Info("state: the cluster cannot place toold's streams yet; trying again", zap.Error(err))
		return true
	}, s.provision)
	if noPeers(err) {
		return fmt.Errorf("%w (are as many nodes up as state.nats.replicas asks?)", err)
	}
	return err
}

// noRoom reports whether the store refused a stream for want of room
// for its byte limit: a server at its max_file_store, or a cluster none
// of whose nodes has the room to place a replica.
func noRoom(err error) bool {
	var api *jetstream.APIError
	return errors.Is(classify(err), ErrFull) ||
		noPeers(err) && errors.As(err, &api) && strings.Contains(api.Description, "insufficient storage")
}

// placementPending reports whether a provisioning error may pass by
// itself: no peers to place a replica on yet, or the store away.
func placementPending(err error) bool {
	// No node with room for a stream's byte limit is no node yet to come
	// up: said at once, not after ConnectTimeout.
	return noPeers(err) && !noRoom(err) || errors.Is(classify(err), ErrUnavailable)
}

// noPeers reports whether the cluster refused to place a replica: fewer
// nodes online than the stream's replicas.
func noPeers(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && api.ErrorCode == jetstream.ErrorCode(server.JSClusterNoPeersErrF)
}

// provision creates or updates the buckets and streams, so a new limit in
// the configuration takes effect at the next start.
func (s *Store) provision(ctx context.Context) error {
	if err := checkServer(s.nc); err != nil {
		return err
	}
	o := s.opts
	var err error
	kv := func(name, desc string, ttl time.Duration) (*Bucket, error) {
		return s.kvBucket(ctx, jetstream.KeyValueConfig{Bucket: name, Description: desc, TTL: ttl}, kvOpts{leaderReads: true})
	}
	if s.Executions, err = kv(ExecutionsBucket, "toold execution records", o.Retention); err != nil {
		return err
	}
	if s.Idempotency, err = kv(IdempotencyBucket, "toold idempotency keys and turn claims", o.IdempotencyTTL); err != nil {
		return err
	}
	if s.Waits, err = kv(WaitsBucket, "toold executions that wait, by id", o.Retention); err != nil {
		return err
	}
	if s.confirmations, err = s.confirmationsBucket(ctx); err != nil {
		return err
	}
	if s.Pins, err = s.pinsBucket(ctx); err != nil {
		return err
	}
	if s.revokedSessions, err = s.revokedSessionsBucket(ctx); err != nil {
		return err
	}
	if s.sessionTokens, err = s.sessionTokensBucket(ctx); err != nil {
		return err
	}
	if s.Credentials, err = s.credentialsBucket(ctx); err != nil {
		return err
	}
	if s.artifacts, err = s.artifactsBucket(ctx); err != nil {
		if !s.opts.artifactsDefaulted || !noRoom(err) {
			return err
		}
		// The store cannot reserve the default bound (an external
		// cluster's max_file_store, set before artifacts were kept):
		// toold serves on, answering heads alone, rather than not start
		// after an upgrade. A bound the operator chose fails instead.
		s.log.Warn("state: no room to keep results over their budget whole; they are answered with their heads alone "+
			"(set state.artifacts.max_bytes to what the store can hold)", zap.Int64("wanted_bytes", s.opts.ArtifactsMaxBytes), zap.Error(err))
		s.artifacts = nil
	}
	streams := []jetstream.StreamConfig{
		// Not a work-queue stream: there every acknowledgement deletes a
		// message from disk, which costs more than the rest of an async
		// execution together. The workers' durable consumer delivers each
		// message to one of them; acknowledged ones age out with the
		// records.
		{Name: WorkStream, Description: "toold accepted async executions", Subjects: []string{WorkSubject},
			Retention: jetstream.LimitsPolicy, MaxAge: o.Retention, Storage: jetstream.FileStorage, Replicas: o.Replicas,
			Discard: jetstream.DiscardNew},
		{Name: EventsStream, Description: "toold activity and execution events", Subjects: []string{EventsSubjects},
			MaxAge: o.EventsMaxAge, MaxBytes: o.EventsMaxBytes, Storage: jetstream.FileStorage, Replicas: o.Replicas,
			Discard: jetstream.DiscardOld},
		// Records leave only by the limits (age, bytes): a client of the
		// store may not delete one or purge the log. The server refuses
		// to clear either flag on an existing stream.
		{Name: AuditStream, Description: "toold audit log, signed and hash-chained", Subjects: []string{AuditSubject},
			MaxAge: o.AuditMaxAge, MaxBytes: o.AuditMaxBytes, Storage: jetstream.FileStorage, Replicas: o.Replicas,
			Discard: jetstream.DiscardOld, DenyDelete: true, DenyPurge: true},
		// A timer is a message the server holds and publishes when it is
		// due: no consumer holds it meanwhile, so open waits take no
		// MaxAckPending slot of anyone's (see docs/design.md). A timer
		// lives as long as a record does.
		{Name: TimersStream, Description: "toold timers: waits' expiries and executions' leases", Subjects: []string{TimerSubject + "*", TimerDueSubject},
			MaxAge: o.Retention, Storage: jetstream.FileStorage, Replicas: o.Replicas, Discard: jetstream.DiscardOld,
			AllowMsgSchedules: true, AllowRollup: true},
	}
	for _, sc := range streams {
		st, err := s.js.CreateOrUpdateStream(ctx, sc)
		if err != nil {
			return fmt.Errorf("stream %s: %w", sc.Name, err)
		}
		switch sc.Name {
		case WorkStream:
			s.work = st
		case TimersStream:
			if !st.CachedInfo().Config.AllowMsgSchedules {
				return fmt.Errorf("stream %s: the NATS server does not schedule messages, which toold's timers need: "+
					"run nats-server 2.12 or later on every server of the cluster", sc.Name)
			}
			s.timers = st
		}
	}
	return nil
}

// Schedule sets the timer of an execution (one per execution: a new one
// replaces the last) to fire at (to the second, never early) with data,
// and returns its sequence in the timers stream.
func (s *Store) Schedule(ctx context.Context, execution string, at time.Time, data []byte) (uint64, error) {
	if at.Truncate(time.Second) != at {
		at = at.Truncate(time.Second).Add(time.Second)
	}
	ack, err := s.Publish(ctx, "timer_schedule", TimerSubject+execution, data,
		jetstream.WithScheduleAt(at), jetstream.WithScheduleTarget(TimerDueSubject))
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// Scheduled returns the data of an execution's timer that is set and has
// not fired, or ErrNotFound.
func (s *Store) Scheduled(ctx context.Context, execution string) ([]byte, error) {
	start := time.Now()
	msg, err := s.timers.GetLastMsgForSubject(ctx, TimerSubject+execution)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		err = ErrNotFound
	} else {
		err = classify(err)
	}
	s.metrics.observe("timer_get", start, err)
	if err != nil {
		return nil, err
	}
	return msg.Data, nil
}

// Unschedule deletes a timer by its sequence, so it never fires; one that
// fired or is gone already is not an error.
func (s *Store) Unschedule(ctx context.Context, seq uint64) error {
	return s.deleteMsg(ctx, s.timers, seq, "timer_unschedule")
}

// DropWork deletes a work message by its stream sequence. A message a
// consumer holds unacknowledged (a wait's timer) counts against the
// consumer's MaxAckPending until it comes back; deleting it releases it
// at once, as an acknowledgement would, from any replica. One that is
// gone already is not an error.
func (s *Store) DropWork(ctx context.Context, seq uint64) error {
	return s.deleteMsg(ctx, s.work, seq, "work_drop")
}

// deleteMsg deletes a stream's message, recorded under op; one gone
// already is not an error.
func (s *Store) deleteMsg(ctx context.Context, stream jetstream.Stream, seq uint64, op string) error {
	start := time.Now()
	err := stream.DeleteMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) || errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful) {
		err = nil
	}
	err = classify(err)
	s.metrics.observe(op, start, err)
	return err
}

// JetStream is the client, for consumers and streams.
func (s *Store) JetStream() jetstream.JetStream { return s.js }

// Conn is the NATS connection (core subjects such as CancelSubject).
func (s *Store) Conn() *nats.Conn { return s.nc }

// Name is this process's replica name.
func (s *Store) Name() string { return s.opts.Name }

// Retention is how long execution records are kept.
func (s *Store) Retention() time.Duration { return s.opts.Retention }

// Ready reports an error while the store cannot be reached.
func (s *Store) Ready() error {
	if s == nil || s.nc == nil {
		return ErrUnavailable
	}
	if st := s.nc.Status(); st != nats.CONNECTED {
		return fmt.Errorf("%w: the connection to %s is %s", ErrUnavailable, s.where(), strings.ToLower(st.String()))
	}
	return nil
}

// Writable reports whether the store has taken every operation of the
// last two seconds: connected, and no operation found it unavailable (a
// stream without a leader, a lost quorum). It is a hint for choosing the
// cheaper of two ways, never a promise: the next write may still fail.
func (s *Store) Writable() bool {
	if s.Ready() != nil {
		return false
	}
	last := s.metrics.unavailable.Load()
	return last == 0 || time.Since(time.Unix(0, last)) > 2*time.Second
}

// Publish appends data to a stream's subject and waits for the store's
// acknowledgement, recording latency and errors under op.
func (s *Store) Publish(ctx context.Context, op, subject string, data []byte, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	start := time.Now()
	ack, err := s.js.Publish(ctx, subject, data, opts...)
	err = classify(err)
	s.metrics.observe(op, start, err)
	return ack, err
}

// PublishAll appends messages to their streams at once, each without
// waiting for the one before (one round trip for all, where one at a time
// costs one each: on a cluster, a flush of events for a thousand
// executions fell behind the calls making them), and returns each one's
// error, recording each latency and error under op.
func (s *Store) PublishAll(ctx context.Context, op string, msgs []*nats.Msg) []error {
	start := time.Now()
	futures := make([]jetstream.PubAckFuture, len(msgs))
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		futures[i], errs[i] = s.js.PublishMsgAsync(m)
		if errs[i] != nil && errors.Is(classify(errs[i]), ErrUnavailable) {
			break // the connection refuses: the rest would too
		}
	}
	for i, f := range futures {
		switch {
		case f == nil && errs[i] == nil:
			errs[i] = ErrUnavailable // not sent: the connection refused one before
		case f != nil:
			select {
			case <-f.Ok():
			case errs[i] = <-f.Err():
			case <-ctx.Done():
				errs[i] = ctx.Err()
			}
		}
		errs[i] = classify(errs[i])
		s.metrics.observe(op, start, errs[i])
	}
	return errs
}

// Observe records the latency and outcome of a store operation made
// outside Bucket and Publish (consumers, stream reads).
func (s *Store) Observe(op string, start time.Time, err error) {
	s.metrics.observe(op, start, classify(err))
}

// Close drains the connection and stops the embedded server.
func (s *Store) Close() error {
	if s == nil {
		return nil
	}
	s.closing.Store(true)
	if s.nc != nil && !s.nc.IsClosed() {
		// The connection stays set, closed: users racing with Close get
		// ErrUnavailable, not a nil connection.
		_ = s.nc.Drain()
		deadline := time.Now().Add(2 * time.Second)
		for !s.nc.IsClosed() && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		s.nc.Close()
	}
	if s.embedded != nil {
		s.embedded.Shutdown()
		s.embedded.WaitForShutdown()
		s.embedded = nil
	}
	if s.unlock != nil {
		s.unlock()
		s.unlock = nil
	}
	s.metrics.connected.Set(0)
	return nil
}

// Errors a store operation may end with, besides a caller's context.
var (
	// ErrUnavailable: the store cannot be reached now.
	ErrUnavailable = errors.New("the state store is unavailable")
	// ErrFull: the store refused a write for lack of space.
	ErrFull = errors.New("the state store is full")
)

// classify maps a client error to ErrUnavailable, ErrFull or ErrConflict
// where it is one, keeping the original as the cause.
func classify(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) || errors.Is(err, ErrFull) || errors.Is(err, ErrConflict) {
		return err
	}
	var api *jetstream.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode {
		case jetstream.JSErrCodeStreamWrongLastSequence, jetstream.JSErrCodeStreamWrongLastSequenceConstant:
			// An expected last sequence (a KV revision, the audit chain's
			// tail) that another writer moved: contention, not a failure.
			// Replicated streams report it with the second code.
			return fmt.Errorf("%w: %w", ErrConflict, err)
		case jetstream.ErrorCode(server.JSInsufficientResourcesErr), jetstream.ErrorCode(server.JSStorageResourcesExceededErr),
			// A write refused by a stream at its limits (maximum bytes or
			// messages exceeded, with discard new).
			jetstream.ErrorCode(server.JSStreamStoreFailedF):
			return fmt.Errorf("%w: %w", ErrFull, err)
		case jetstream.ErrorCode(server.JSClusterNotAvailErr), jetstream.ErrorCode(server.JSStreamOfflineErr),
			jetstream.ErrorCode(server.JSStreamOfflineReasonErrF), jetstream.ErrorCode(server.JSStreamExpectedLastSeqPerSubjectNotReady):
			// A cluster between leaders (its meta group's, a stream's),
			// as it is while a lost quorum comes back: the store is away
			// for a moment, as when a request times out. (The chaos
			// harness saw a GET ?wait answered 503 at once by the
			// first, read from the stream's leader.)
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return err
	}
	switch {
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, nats.ErrTimeout), errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, nats.ErrDisconnected),
		errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}
