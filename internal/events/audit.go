package events

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/state"
	"github.com/toold/toold/internal/strictjson"
)

// Record is one entry of the audit log: who did what, with which outcome.
// Arguments appear only as the SHA-256 of their canonical JSON (sorted keys,
// no spaces), so the log proves what was asked without holding it.
//
// Records form one chain across every replica: each carries the hash of
// the one before (Prev) and its own (Hash), the SHA-256 of its line up to
// the hash, so removing or changing a record breaks the chain at that point.
//
// A hash chain alone can be re-sealed by anyone who can write the store:
// edit a record, recompute every hash after it. So the last record of
// every append is signed (SignedFrom, KeyID, Sig, after the hash): an
// ed25519 signature, with a key the store does not hold, of that record's
// hash and of SignedFrom, the first record of the append. Through the
// chain it covers every record before it; it vouches that records
// SignedFrom to Seq were written by a holder of the key. A record no
// signature vouches for was inserted by something else.
//
// That is format 1, each record hashed on its own. Format 2 (V: 2, what
// toold writes now; auditblock.go) hashes an append's records together as
// one block: only the block's last record carries Prev, Hash and the
// signature, and the hash covers every line of the block. A verifier
// reads both; a log may hold format 1 records and then format 2 blocks.
type Record struct {
	// V is the record's format: 2, or absent for format 1.
	V       int       `json:"v,omitempty"`
	Seq     uint64    `json:"seq"`
	Time    time.Time `json:"time"`
	Replica string    `json:"replica"`
	Kind    string    `json:"kind"` // call | admin
	Caller  string    `json:"caller"`
	// Principal is a token's subject, issuer and acting client (and the
	// actor of a delegation), beside Caller's name.
	Principal   *auth.Identity `json:"principal,omitempty"`
	Action      string         `json:"action"` // execute, or the administrative action
	Tool        string         `json:"tool,omitempty"`
	ArgsSHA256  string         `json:"args_sha256,omitempty"`
	Status      string         `json:"status,omitempty"`
	ErrorType   string         `json:"error_type,omitempty"`
	DurationMS  float64        `json:"duration_ms"`
	RequestID   string         `json:"request_id,omitempty"`
	ExecutionID string         `json:"execution_id,omitempty"`
	Target      string         `json:"target,omitempty"`
	// RecoveredFrom names the replica that ran the call and stopped
	// before its own record reached the log: this one was written from
	// the call's final execution record by the replica named in Replica
	// (recovery.go).
	RecoveredFrom string `json:"recovered_from,omitempty"`
	// Prev is the hash the record (format 1) or block (format 2) chains
	// to: format 1 writes it, empty on the first record, on every record;
	// format 2 only on a block's last.
	Prev       string `json:"prev,omitempty"`
	Hash       string `json:"hash,omitempty"`
	SignedFrom uint64 `json:"signed_from,omitempty"`
	KeyID      string `json:"kid,omitempty"`
	Sig        string `json:"sig,omitempty"`
}

// signed reports whether the record carries a signature (or part of one).
func (r *Record) signed() bool { return r.SignedFrom != 0 || r.KeyID != "" || r.Sig != "" }

// ArgsHash is the hex SHA-256 of the arguments' canonical JSON (after
// RedactArguments), as an audit record holds it; arguments that are not
// JSON (a refused call) are hashed as sent.
func (r *Recorder) ArgsHash(tool string, args []byte) string {
	if len(args) == 0 {
		args = []byte("{}")
	}
	if r.opts.RedactArguments != nil {
		args = r.opts.RedactArguments(tool, args)
	}
	sum := sha256.Sum256(strictjson.Canonical(args))
	return hex.EncodeToString(sum[:])
}

// appendSeal writes how a line ends: `,"hash":"<hex>"}`, or for a signed
// record `,"hash":"<hex>","signed_from":N,"kid":"<hex>","sig":"<base64>"}`.
func appendSeal(dst []byte, rec *Record) []byte {
	dst = append(dst, `,"hash":"`...)
	dst = append(dst, rec.Hash...)
	dst = append(dst, '"')
	if rec.signed() {
		dst = append(dst, `,"signed_from":`...)
		dst = strconv.AppendUint(dst, rec.SignedFrom, 10)
		dst = append(dst, `,"kid":"`...)
		dst = append(dst, rec.KeyID...)
		dst = append(dst, `","sig":"`...)
		dst = append(dst, rec.Sig...)
		dst = append(dst, '"')
	}
	return append(dst, '}')
}

// openLine checks one line's own hash and returns its record. (Its
// signature, if any, is the verifier's to check: that needs the keys.)
func openLine(line []byte) (Record, error) {
	var rec Record
	if err := json.Unmarshal(line, &rec); err != nil {
		return rec, fmt.Errorf("the line is not a record: %v", err)
	}
	suffix := appendSeal(nil, &rec)
	if rec.Hash == "" || !bytes.HasSuffix(line, suffix) {
		return rec, errors.New("the line does not end with its hash")
	}
	body := append(append([]byte{}, line[:len(line)-len(suffix)]...), '}')
	sum := sha256.Sum256(body)
	if hex.EncodeToString(sum[:]) != rec.Hash {
		return rec, errors.New("the record does not match its hash: it was altered")
	}
	return rec, nil
}

// chain appends sealed records to the audit stream so that the whole
// stream is one chain, whichever replica writes: each append expects the
// stream's last sequence it knows, and on a conflict reloads the tail and
// seals the batch again.
type chain struct {
	st      *state.Store
	signer  *Signer
	log     *zap.Logger
	loaded  bool
	lastSeq uint64 // stream sequence of the last message
	head    Record // the last record
	buf     []byte // the message being sealed, reused
	hasher  hash.Hash
	// wrote is the last record this chain appended, for checkpoints
	// (read by another goroutine than the flusher's).
	wrote atomic.Pointer[Checkpoint]
}

// newChain builds the recorder's chain. Without a signer it signs with a
// key made for this process (whose records only its PublicKey verifies):
// toold itself always passes one, see cmd/toold.
func newChain(o Options) *chain {
	signer := o.Signer
	if signer == nil {
		signer = GenerateSigner()
	}
	return &chain{st: o.Store, signer: signer, log: o.Logger}
}

func (c *chain) load(ctx context.Context) error {
	s, err := c.st.JetStream().Stream(ctx, state.AuditStream)
	if err != nil {
		return err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return err
	}
	c.lastSeq, c.head = info.State.LastSeq, Record{}
	if info.State.Msgs > 0 {
		msg, err := s.GetMsg(ctx, info.State.LastSeq)
		if err != nil {
			return err
		}
		if c.head, err = lastRecord(splitLines(msg.Data)); err != nil {
			return fmt.Errorf("the audit log's last record: %w", err)
		}
	}
	// A tail before what this chain wrote itself: the log lost its end
	// under us. Appending goes on (a stopped audit log helps no one);
	// verify against a checkpoint shows where.
	if w := c.wrote.Load(); w != nil && c.head.Seq < w.Seq {
		c.log.Error("audit: the audit log was truncated: it ends before a record this replica wrote",
			zap.Uint64("log_ends_at", c.head.Seq), zap.Uint64("wrote", w.Seq), zap.String("wrote_hash", w.Head))
	}
	c.loaded = true
	return nil
}

// append seals recs after the chain's head and publishes them as one
// message, retrying on another writer's append.
func (c *chain) append(ctx context.Context, recs []Record) error {
	for attempt := 0; attempt < 20; attempt++ {
		if !c.loaded {
			if err := c.load(ctx); err != nil {
				return err
			}
		}
		for i := range recs {
			recs[i].Seq = c.head.Seq + 1 + uint64(i)
		}
		buf := append(c.sealBlock(c.buf[:0], recs, c.head.Hash), '\n')
		c.buf = buf
		ack, err := c.st.Publish(ctx, "audit_append", state.AuditSubject, buf, jetstream.WithExpectLastSequence(c.lastSeq))
		if err == nil {
			c.lastSeq, c.head = ack.Sequence, recs[len(recs)-1]
			c.wrote.Store(&Checkpoint{Seq: c.head.Seq, Head: c.head.Hash, Time: time.Now().UTC()})
			return nil
		}
		// Reload the tail either way; on a conflict another replica
		// appended, so chain after its records.
		c.loaded = false
		if !errors.Is(err, state.ErrConflict) {
			return err
		}
	}
	return errors.New("audit: too many concurrent appends")
}

func splitLines(data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			out = append(out, data)
			break
		}
		if i > 0 {
			out = append(out, data[:i])
		}
		data = data[i+1:]
	}
	return out
}
