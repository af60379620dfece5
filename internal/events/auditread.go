package events

import (
	"bufio"
	"context"
	"fmt"
	"io"

	"github.com/toold/toold/internal/state"
)

// ReadAudit calls yield with each audit line after the position `after`
// (byte-exact, as sealed), up to the end of the log as it was when the read
// began; it stops early when yield returns false.
func ReadAudit(ctx context.Context, st *state.Store, after ID, yield func(ID, []byte) bool) error {
	s, err := st.JetStream().Stream(ctx, state.AuditStream)
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

// Verification is what Verify found.
type Verification struct {
	Records uint64 `json:"records"`
	// First and Last are the record numbers checked; records before First
	// were removed by the log's retention limits.
	First uint64 `json:"first"`
	Last  uint64 `json:"last"`
	// Head is the last record's hash: keep it to detect later truncation.
	Head     string   `json:"head"`
	Problems []string `json:"problems"`
}

// OK reports whether the chain is whole.
func (v *Verification) OK() bool { return len(v.Problems) == 0 }

// verifier checks records one by one.
type verifier struct {
	v    Verification
	prev *Record
}

func (c *verifier) add(where string, line []byte) {
	c.v.Records++
	rec, err := openLine(line)
	if err != nil {
		c.v.Problems = append(c.v.Problems, fmt.Sprintf("%s: %v", where, err))
		c.prev = nil // the next record cannot be linked to this one
		return
	}
	switch {
	case c.prev == nil && c.v.First == 0:
		c.v.First = rec.Seq
	case c.prev == nil:
	case rec.Seq != c.prev.Seq+1:
		c.v.Problems = append(c.v.Problems, fmt.Sprintf("%s: record %d follows record %d: %d record(s) removed",
			where, rec.Seq, c.prev.Seq, int64(rec.Seq)-int64(c.prev.Seq)-1))
	case rec.Prev != c.prev.Hash:
		c.v.Problems = append(c.v.Problems, fmt.Sprintf("%s: record %d does not chain to record %d: one of them was altered or replaced",
			where, rec.Seq, c.prev.Seq))
	}
	c.v.Last, c.v.Head = rec.Seq, rec.Hash
	c.prev = &rec
}

// Verify walks the whole audit log in the store and checks every record's
// hash and its link to the one before.
func Verify(ctx context.Context, st *state.Store) (*Verification, error) {
	c := &verifier{}
	err := ReadAudit(ctx, st, ID{}, func(id ID, line []byte) bool {
		c.add("message "+id.String(), line)
		return true
	})
	return &c.v, err
}

// VerifyFile checks an export (one record per line).
func VerifyFile(r io.Reader) (*Verification, error) {
	c := &verifier{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	n := 0
	for sc.Scan() {
		n++
		if len(sc.Bytes()) > 0 {
			c.add(fmt.Sprintf("line %d", n), sc.Bytes())
		}
	}
	return &c.v, sc.Err()
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
