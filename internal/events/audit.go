package events

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toold/toold/internal/state"
)

// Record is one entry of the audit log: who did what, with which outcome.
// Arguments appear only as the SHA-256 of their canonical JSON (sorted keys,
// no spaces), so the log proves what was asked without holding it.
//
// Records form one chain across every replica: each carries the hash of
// the one before (Prev) and its own (Hash), the SHA-256 of its line up to
// the hash, so removing or changing a record breaks the chain at that point.
type Record struct {
	Seq         uint64    `json:"seq"`
	Time        time.Time `json:"time"`
	Replica     string    `json:"replica"`
	Kind        string    `json:"kind"` // call | admin
	Caller      string    `json:"caller"`
	Action      string    `json:"action"` // execute, or the administrative action
	Tool        string    `json:"tool,omitempty"`
	ArgsSHA256  string    `json:"args_sha256,omitempty"`
	Status      string    `json:"status,omitempty"`
	ErrorType   string    `json:"error_type,omitempty"`
	DurationMS  float64   `json:"duration_ms"`
	RequestID   string    `json:"request_id,omitempty"`
	ExecutionID string    `json:"execution_id,omitempty"`
	Target      string    `json:"target,omitempty"`
	Prev        string    `json:"prev"`
	Hash        string    `json:"hash,omitempty"`
}

// argsHash is the hex SHA-256 of the arguments' canonical JSON; arguments
// that are not JSON (a refused call) are hashed as sent.
func (r *Recorder) argsHash(tool string, args []byte) string {
	if len(args) == 0 {
		args = []byte("{}")
	}
	if r.opts.RedactArguments != nil {
		args = r.opts.RedactArguments(tool, args)
	}
	sum := sha256.Sum256(Canonical(args))
	return hex.EncodeToString(sum[:])
}

// Canonical returns JSON in the RFC 8785 canonical form (JCS: object keys
// sorted, no insignificant space, numbers and strings written one way), so
// key order and spacing do not change a hash; input that is not one JSON
// value comes back unchanged.
func Canonical(data []byte) []byte {
	v := jsontext.Value(append(make([]byte, 0, len(data)), data...))
	if err := v.Canonicalize(); err != nil {
		return data
	}
	return v
}

// hashSuffix is how a line ends: `,"hash":"<64 hex>"}`.
const hashSuffixLen = len(`,"hash":""}`) + 64

// seal fills rec.Prev and rec.Hash and appends its line (no newline) to
// dst: the record up to its hash is hashed as written, then the hash is
// written in place of the closing brace.
func seal(dst []byte, rec *Record, prev string) []byte {
	rec.Prev, rec.Hash = prev, ""
	start := len(dst)
	dst = appendRecord(dst, rec) // ends with "prev":"..."}
	sum := sha256.Sum256(dst[start:])
	rec.Hash = hex.EncodeToString(sum[:])
	dst = append(dst[:len(dst)-1], `,"hash":"`...)
	dst = append(dst, rec.Hash...)
	return append(dst, `"}`...)
}

// openLine checks one line's own hash and returns its record.
func openLine(line []byte) (Record, error) {
	var rec Record
	if len(line) < hashSuffixLen || !bytes.HasPrefix(line[len(line)-hashSuffixLen:], []byte(`,"hash":"`)) {
		return rec, errors.New("the line does not end with its hash")
	}
	if err := json.Unmarshal(line, &rec); err != nil {
		return rec, fmt.Errorf("the line is not a record: %v", err)
	}
	body := append(append([]byte{}, line[:len(line)-hashSuffixLen]...), '}')
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
	loaded  bool
	lastSeq uint64 // stream sequence of the last message
	head    Record // the last record
	buf     []byte // the message being sealed, reused
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
		lines := splitLines(msg.Data)
		if len(lines) > 0 {
			if c.head, err = openLine(lines[len(lines)-1]); err != nil {
				return fmt.Errorf("the audit log's last record: %w", err)
			}
		}
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
		buf := c.buf[:0]
		prev, seq := c.head.Hash, c.head.Seq
		for i := range recs {
			seq++
			recs[i].Seq = seq
			buf = append(seal(buf, &recs[i], prev), '\n')
			prev = recs[i].Hash
		}
		c.buf = buf
		ack, err := c.st.Publish(ctx, "audit_append", state.AuditSubject, buf, jetstream.WithExpectLastSequence(c.lastSeq))
		if err == nil {
			c.lastSeq, c.head = ack.Sequence, recs[len(recs)-1]
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
