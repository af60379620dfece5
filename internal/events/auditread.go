package events

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toold/toold/internal/state"
)

// ReadAudit calls yield with each audit line after the position `after`
// (byte-exact, as sealed), up to the end of the log as it was when the read
// began; it stops early when yield returns false.
func ReadAudit(ctx context.Context, st *state.Store, after ID, yield func(ID, []byte) bool) error {
	s, err := st.JetStream().Stream(ctx, state.AuditStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil // a store no toold has written to yet
	}
	if err != nil {
		return err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return err
	}
	end := info.State.LastSeq
	if info.State.Msgs == 0 || after.Seq > end {
		return nil
	}
	pos := Position{After: after, FromStart: true, Until: end}
	return Subscribe(ctx, st, state.AuditStream, []string{state.AuditSubject}, pos, func(l Line) bool {
		return yield(l.ID, l.Data)
	})
}

// VerifyOptions say what a verification trusts and checks against.
type VerifyOptions struct {
	// Keys are the public keys whose signatures are trusted. Without
	// them no record can be shown to be toold's.
	Keys *Keyring
	// Checkpoints are heads published earlier: the log must still hold
	// each, unchanged.
	Checkpoints []Checkpoint
}

// Verification is what Verify found.
type Verification struct {
	Records uint64 `json:"records"`
	// First and Last are the record numbers checked; records before First
	// were removed by the log's retention limits.
	First uint64 `json:"first"`
	Last  uint64 `json:"last"`
	// Head is the last record's hash: keep it to detect later truncation.
	Head string `json:"head"`
	// Signed counts the valid signatures; Keys are the ids of the keys
	// that made them.
	Signed uint64   `json:"signed"`
	Keys   []string `json:"keys,omitempty"`
	// Checkpoints counts the checkpoints the log matched.
	Checkpoints int      `json:"checkpoints"`
	Problems    []string `json:"problems"`
	// Notes are what the verification could not judge (a checkpoint older
	// than the oldest record kept).
	Notes []string `json:"notes,omitempty"`
}

// OK reports whether the chain is whole.
func (v *Verification) OK() bool { return len(v.Problems) == 0 }

// maxProblems bounds the problems listed: a log signed with a key verify
// was not given would list every append.
const maxProblems = 1000

// verifier checks records one by one.
type verifier struct {
	v    Verification
	o    VerifyOptions
	prev *Record
	// unvouched is the first record no signature has vouched for yet (0:
	// none); a signature vouching from a later record leaves it out.
	unvouched uint64
	keys      map[string]bool  // keys whose signatures were valid
	unknown   map[string]bool  // keys verify was not given
	bySeq     map[uint64][]int // checkpoints (indexes) by record number
	seenCP    map[int]bool     // checkpoints whose record was read
	more      int              // problems beyond maxProblems
	// block holds the lines of a format 2 block read so far, before its
	// seal; where says where its first line was.
	block [][]byte
	where string
}

func newVerifier(o VerifyOptions) *verifier {
	c := &verifier{o: o, keys: map[string]bool{}, unknown: map[string]bool{}, bySeq: map[uint64][]int{}, seenCP: map[int]bool{}}
	for i, cp := range o.Checkpoints {
		c.bySeq[cp.Seq] = append(c.bySeq[cp.Seq], i)
	}
	return c
}

func (c *verifier) problem(format string, args ...any) {
	if len(c.v.Problems) >= maxProblems {
		c.more++
		return
	}
	c.v.Problems = append(c.v.Problems, fmt.Sprintf(format, args...))
}

// add checks one line: a format 1 record, or a line of a format 2
// block (checked with the block, at its seal).
func (c *verifier) add(where string, line []byte) {
	if isBlockLine(line) {
		c.addBlockLine(where, line)
		return
	}
	c.unsealed()
	c.v.Records++
	rec, err := openLine(line)
	if err != nil {
		c.problem("%s: %v", where, err)
		c.prev = nil // the next record cannot be linked to this one
		return
	}
	c.link(where, &rec, rec.Seq)
	if c.unvouched == 0 {
		c.unvouched = rec.Seq
	}
	if rec.signed() {
		c.vouch(where, &rec)
	}
	c.checkpoint(&rec)
	c.v.Last, c.v.Head = rec.Seq, rec.Hash
	c.prev = &rec
}

// isBlockLine reports whether a line is a format 2 record: it starts so.
func isBlockLine(line []byte) bool { return bytes.HasPrefix(line, []byte(`{"v":2,`)) }

// link checks that a record (or a block, starting at first) follows the
// one read before: the next number, and its prev that one's hash.
func (c *verifier) link(where string, rec *Record, first uint64) {
	switch {
	case c.prev == nil && c.v.First == 0:
		c.v.First = first
	case c.prev == nil:
	case first != c.prev.Seq+1:
		c.problem("%s: record %d follows record %d: %d record(s) removed",
			where, first, c.prev.Seq, int64(first)-int64(c.prev.Seq)-1)
	case rec.Prev != c.prev.Hash:
		c.problem("%s: record %d does not chain to record %d: one of them was altered or replaced", where, first, c.prev.Seq)
	}
}

// addBlockLine keeps a format 2 line until its block's seal, then checks
// the block: its hash, its link to what came before, its signature.
func (c *verifier) addBlockLine(where string, line []byte) {
	if len(c.block) == 0 {
		c.where = where
	}
	c.block = append(c.block, bytes.Clone(line))
	c.v.Records++
	if !bytes.Contains(line, []byte(`"hash":"`)) {
		return // more of the block follows
	}
	lines := c.block
	c.block = nil
	recs, err := openBlock(lines)
	if err != nil {
		if recs != nil {
			c.link(c.where, &Record{Prev: recs[len(recs)-1].Prev}, recs[0].Seq)
		}
		c.problem("%s: %v", c.where, err)
		c.prev = nil
		return
	}
	seal := &recs[len(recs)-1]
	c.link(c.where, seal, recs[0].Seq)
	if c.unvouched == 0 {
		c.unvouched = recs[0].Seq
	}
	if !seal.signed() || seal.SignedFrom != recs[0].Seq {
		c.problem("%s: the block of records %d to %d is not signed from its first record", c.where, recs[0].Seq, seal.Seq)
	} else {
		c.vouch(c.where, seal)
	}
	for i := range recs[:len(recs)-1] {
		c.insideBlock(&recs[i])
	}
	c.checkpoint(seal)
	c.v.Last, c.v.Head = seal.Seq, seal.Hash
	c.prev = seal
}

// insideBlock reports checkpoints naming a record inside a block, which
// no toold publishes (its checkpoints name the last record it appended).
func (c *verifier) insideBlock(rec *Record) {
	for _, i := range c.bySeq[rec.Seq] {
		c.seenCP[i] = true
		c.problem("the checkpoint %s names record %d, inside a block whose hash is its last record's: no toold published it", c.o.Checkpoints[i], rec.Seq)
	}
}

// unsealed reports a format 2 block whose seal never came (the log went
// on, or ended, without it).
func (c *verifier) unsealed() {
	if len(c.block) == 0 {
		return
	}
	var first, last Record
	_ = json.Unmarshal(c.block[0], &first)
	_ = json.Unmarshal(c.block[len(c.block)-1], &last)
	c.problem("%s: records %d to %d are not sealed: their block's last record, which holds its hash and signature, was removed",
		c.where, first.Seq, last.Seq)
	c.block = nil
	c.prev = nil
}

// vouch checks a signed record's signature and the records it vouches for.
func (c *verifier) vouch(where string, rec *Record) {
	if err := c.o.Keys.check(rec); err != nil {
		if errors.Is(err, errUnknownKey) {
			if !c.unknown[rec.KeyID] { // once per key: what follows says which records it leaves unsigned
				c.unknown[rec.KeyID] = true
				c.problem("%s: record %d %v (key %s)", where, rec.Seq, err, rec.KeyID)
			}
			return
		}
		c.problem("%s: record %d %v (key %s)", where, rec.Seq, err, rec.KeyID)
		return
	}
	if rec.SignedFrom == 0 || rec.SignedFrom > rec.Seq {
		c.problem("%s: record %d vouches for records from %d on, which cannot be", where, rec.Seq, rec.SignedFrom)
		return
	}
	if c.unvouched < rec.SignedFrom {
		c.problem("%s: records %d to %d are not signed: they were inserted, or re-sealed without the key", where, c.unvouched, rec.SignedFrom-1)
	}
	c.unvouched = 0
	c.v.Signed++
	if !c.keys[rec.KeyID] {
		c.keys[rec.KeyID] = true
		c.v.Keys = append(c.v.Keys, rec.KeyID)
	}
}

// checkpoint compares a record with the checkpoints of its number.
func (c *verifier) checkpoint(rec *Record) {
	for _, i := range c.bySeq[rec.Seq] {
		cp := c.o.Checkpoints[i]
		c.seenCP[i] = true
		if !strings.HasPrefix(rec.Hash, cp.Head) {
			c.problem("record %d does not match the checkpoint %s: the log was rewritten since", rec.Seq, cp)
			continue
		}
		c.v.Checkpoints++
	}
}

// finish reports what only the end shows: records after the last
// signature, and checkpoints beyond the end of the log.
func (c *verifier) finish() *Verification {
	c.unsealed()
	if c.unvouched != 0 {
		c.problem("records %d to %d are not signed: the log ends with records no signature vouches for (re-sealed, or written by something other than toold)",
			c.unvouched, c.v.Last)
	}
	for i, cp := range c.o.Checkpoints {
		switch {
		case c.seenCP[i]:
		case c.v.Records == 0 || cp.Seq > c.v.Last:
			c.problem("the checkpoint %s names record %d, but the log ends at record %d: records were removed from its end", cp, cp.Seq, c.v.Last)
		case cp.Seq < c.v.First:
			c.v.Notes = append(c.v.Notes, fmt.Sprintf("the checkpoint %s is older than the oldest record kept (%d): retention removed it, or the log's beginning was removed", cp, c.v.First))
		default:
			c.problem("the checkpoint %s names record %d, which is missing from the log", cp, cp.Seq)
		}
	}
	if c.more > 0 {
		c.v.Problems = append(c.v.Problems, fmt.Sprintf("... and %d more problem(s)", c.more))
	}
	return &c.v
}

// Verify walks the whole audit log in the store and checks every record's
// hash, its link to the one before, the signatures, and the checkpoints.
func Verify(ctx context.Context, st *state.Store, o VerifyOptions) (*Verification, error) {
	c := newVerifier(o)
	err := ReadAudit(ctx, st, ID{}, func(id ID, line []byte) bool {
		c.add("message "+id.String(), line)
		return true
	})
	return c.finish(), err
}

// VerifyFile checks an export (one record per line).
func VerifyFile(r io.Reader, o VerifyOptions) (*Verification, error) {
	c := newVerifier(o)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	n := 0
	for sc.Scan() {
		n++
		if len(sc.Bytes()) > 0 {
			c.add(fmt.Sprintf("line %d", n), sc.Bytes())
		}
	}
	return c.finish(), sc.Err()
}

// Export writes the whole audit log as JSON Lines, each record byte for
// byte as it was sealed (so VerifyFile can check the export).
func Export(ctx context.Context, st *state.Store, w io.Writer) (int, error) {
	n := 0
	var werr error
	err := ReadAudit(ctx, st, ID{}, func(_ ID, line []byte) bool {
		if _, werr = w.Write(append(line, '\n')); werr != nil {
			return false
		}
		n++
		return true
	})
	if werr != nil {
		return n, werr
	}
	return n, err
}

// AuditedEnds reads the audit log from since (by the store's clock) to its
// end as the read began, and returns which of the ends asked about it
// records, each named AuditedEnd(execution id, status): what a recovery
// of a lost replica's audit records (internal/executions/recovery.go)
// need not write again. (Only those asked about are kept: the log since
// then may hold every replica's records of many seconds.)
func AuditedEnds(ctx context.Context, st *state.Store, since time.Time, asked map[string]bool) (map[string]bool, error) {
	seen := map[string]bool{}
	err := st.ReadSince(ctx, state.AuditStream, since, func(m jetstream.Msg) bool {
		for _, line := range splitLines(m.Data()) {
			var rec struct {
				ExecutionID string `json:"execution_id"`
				Status      string `json:"status"`
			}
			if json.Unmarshal(line, &rec) == nil && rec.ExecutionID != "" {
				if key := AuditedEnd(rec.ExecutionID, rec.Status); asked[key] {
					seen[key] = true
				}
			}
		}
		return true
	})
	return seen, err
}

// AuditedEnd is the key of an execution's end in AuditedEnds.
func AuditedEnd(execution, status string) string { return execution + " " + status }
