package events

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.uber.org/zap"
)

// Checkpoint is the head of the audit chain at one moment: a record's
// number and hash. Published where the store's writers cannot change it,
// it pins the log: a verify given it finds a log rewritten or cut short
// after it, which signatures alone cannot show (a truncated log is still
// validly signed).
type Checkpoint struct {
	Seq uint64 `json:"seq"`
	// Head is the record's hash in hex, or its first digits (12 at least,
	// as the metric carries).
	Head string    `json:"head"`
	Time time.Time `json:"time,omitzero"`
}

// String is the short form `toold audit verify -checkpoint` takes.
func (c Checkpoint) String() string { return strconv.FormatUint(c.Seq, 10) + ":" + c.Head }

// MinCheckpointDigits is the shortest hash prefix a checkpoint may give:
// 48 bits, what a metric's float64 holds exactly.
const MinCheckpointDigits = 12

// ParseCheckpoint reads a checkpoint as the log line or the metric give it
// ("SEQ:HEX", HEX at least 12 hex digits) or as a line of the checkpoint
// file (a JSON object with seq and head).
func ParseCheckpoint(s string) (Checkpoint, error) {
	s = strings.TrimSpace(s)
	if len(s) > 512 {
		return Checkpoint{}, errors.New("a checkpoint is SEQ:HASH or one line of the checkpoint file; this is too long")
	}
	var c Checkpoint
	if strings.HasPrefix(s, "{") {
		if err := json.Unmarshal([]byte(s), &c); err != nil {
			return Checkpoint{}, fmt.Errorf("not a checkpoint line: %v", err)
		}
	} else {
		seq, head, ok := strings.Cut(s, ":")
		n, err := strconv.ParseUint(seq, 10, 64)
		if !ok || err != nil {
			return Checkpoint{}, fmt.Errorf("%q is not SEQ:HASH (e.g. 1234:3f2c9a0b1d7e...)", s)
		}
		c = Checkpoint{Seq: n, Head: head}
	}
	if c.Seq == 0 {
		return Checkpoint{}, errors.New("a checkpoint's record number starts at 1")
	}
	if len(c.Head) < MinCheckpointDigits || len(c.Head) > 64 || strings.ToLower(c.Head) != c.Head {
		return Checkpoint{}, fmt.Errorf("a checkpoint's hash is %d to 64 lowercase hex digits", MinCheckpointDigits)
	}
	if strings.Trim(c.Head, "0123456789abcdef") != "" {
		return Checkpoint{}, errors.New("a checkpoint's hash is hex digits")
	}
	return c, nil
}

// AuditHead is the last record this recorder appended to the audit log;
// false before its first.
func (r *Recorder) AuditHead() (Checkpoint, bool) {
	if c := r.chain.wrote.Load(); c != nil {
		return *c, true
	}
	return Checkpoint{}, false
}

// CheckpointOptions configure a Checkpointer.
type CheckpointOptions struct {
	// Head is where the checkpoints come from (Recorder.AuditHead).
	Head func() (Checkpoint, bool)
	// Interval between checkpoints (default 1m); one is published only
	// when the head moved.
	Interval time.Duration
	// File, when set, gets one JSON line per checkpoint, appended.
	File       string
	Logger     *zap.Logger
	Registerer prometheus.Registerer
}

// Checkpointer publishes the audit chain's head outside the store: as a
// log line ("audit checkpoint", with seq and head), as metrics
// (toold_audit_checkpoint_seq and toold_audit_checkpoint_head48, the
// hash's first 48 bits), and to a file if configured. None of them is
// writable by the store's clients; `toold audit verify -checkpoint` checks
// the log against any of them.
type Checkpointer struct {
	o       CheckpointOptions
	log     *zap.Logger
	seq     prometheus.Gauge
	head48  prometheus.Gauge
	errors  prometheus.Counter
	file    *os.File
	last    uint64
	done    chan struct{}
	stopped chan struct{}
	once    sync.Once
}

// NewCheckpointer opens the file (if any); call Run, then Close.
func NewCheckpointer(o CheckpointOptions) (*Checkpointer, error) {
	o.Interval = cmp.Or(o.Interval, time.Minute)
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	f := promauto.With(o.Registerer)
	c := &Checkpointer{o: o, log: o.Logger, done: make(chan struct{}), stopped: make(chan struct{}),
		seq: f.NewGauge(prometheus.GaugeOpts{Name: "toold_audit_checkpoint_seq",
			Help: "The number of the last audit record this replica appended (a checkpoint, with toold_audit_checkpoint_head48)."}),
		head48: f.NewGauge(prometheus.GaugeOpts{Name: "toold_audit_checkpoint_head48",
			Help: "The first 48 bits of that record's hash, as an integer: toold audit verify -checkpoint SEQ:HEX takes it as 12 hex digits."}),
		errors: f.NewCounter(prometheus.CounterOpts{Name: "toold_audit_checkpoint_errors_total",
			Help: "Audit checkpoints that could not be written to state.audit.checkpoint_file."}),
	}
	if o.File != "" {
		file, err := os.OpenFile(o.File, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("state.audit.checkpoint_file: %w", err)
		}
		c.file = file
	}
	return c, nil
}

// Run publishes a checkpoint every Interval until Close.
func (c *Checkpointer) Run() {
	defer close(c.stopped)
	t := time.NewTicker(c.o.Interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			c.publish()
		case <-c.done:
			return
		}
	}
}

// Close stops Run and publishes the last head (call it after the recorder
// has flushed its last records).
func (c *Checkpointer) Close() {
	c.once.Do(func() {
		close(c.done)
		<-c.stopped
		c.publish()
		if c.file != nil {
			c.file.Close()
		}
	})
}

// Head48 is the first 48 bits of a hex hash as an integer (what the
// metric holds).
func Head48(head string) float64 {
	n, _ := strconv.ParseUint(head[:MinCheckpointDigits], 16, 64)
	return float64(n)
}

func (c *Checkpointer) publish() {
	cp, ok := c.o.Head()
	if !ok || cp.Seq == c.last || len(cp.Head) < MinCheckpointDigits {
		return
	}
	c.last = cp.Seq
	c.seq.Set(float64(cp.Seq))
	c.head48.Set(Head48(cp.Head))
	c.log.Info("audit checkpoint", zap.Uint64("seq", cp.Seq), zap.String("head", cp.Head),
		zap.String("checkpoint", cp.String()))
	if c.file == nil {
		return
	}
	line, _ := json.Marshal(cp)
	if _, err := c.file.Write(append(line, '\n')); err != nil {
		c.errors.Inc()
		c.log.Error("audit: writing a checkpoint to state.audit.checkpoint_file failed", zap.Error(err))
	}
}
