package pins

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// Change is a pending change as GET /tools/changes shows it.
type Change struct {
	// Name is the tool as toold serves it ("<server>.<tool>").
	Name   string `json:"name"`
	Server string `json:"server"`
	Tool   string `json:"tool"`
	// Kind is "changed" (a pinned tool's definition changed) or "new"
	// (a tool of a pinned server, under pin_new: review).
	Kind string `json:"kind"`
	// State is "pending" (waits for a decision) or "refused" (an admin
	// refused it: the tool stays out while the server lists it).
	State     string    `json:"state"`
	OldHash   string    `json:"old_hash,omitempty"`
	NewHash   string    `json:"new_hash"`
	SeenAt    time.Time `json:"seen_at"`
	RefusedBy string    `json:"refused_by,omitempty"`
	// Fields are the parts of the definition that changed (description,
	// inputSchema, ...).
	Fields []string `json:"fields"`
	// Diff is a line diff of the old and new definitions, pretty-printed
	// ("-" old, "+" new, " " both).
	Diff string `json:"diff"`
	// Old and New are the definitions themselves (Old absent for a new
	// tool).
	Old json.RawMessage `json:"old,omitempty"`
	New json.RawMessage `json:"new"`
}

func changeOf(rec *Record) Change {
	p := rec.Pending
	c := Change{Name: rec.Name(), Server: rec.Server, Tool: rec.Tool, Kind: "changed", State: "pending",
		OldHash: rec.Hash, NewHash: p.Hash, SeenAt: p.SeenAt, RefusedBy: p.RefusedBy, Old: rec.Definition, New: p.Definition}
	if rec.Hash == "" {
		c.Kind = "new"
	}
	if p.RefusedBy != "" {
		c.State = "refused"
	}
	c.Fields = changedFields(rec.Definition, p.Definition)
	c.Diff = Diff(pretty(rec.Definition), pretty(p.Definition))
	return c
}

// changedFields names the top-level members that differ.
func changedFields(old, cur json.RawMessage) []string {
	var a, b map[string]json.RawMessage
	_ = json.Unmarshal(old, &a)
	_ = json.Unmarshal(cur, &b)
	out := []string{}
	for k, v := range b {
		if !bytes.Equal(a[k], v) {
			out = append(out, k)
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// pretty is a definition indented, one member a line, for the diff; empty
// for none.
func pretty(def json.RawMessage) string {
	if len(def) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Indent(&b, def, "", "  "); err != nil {
		return string(def)
	}
	return b.String()
}

// maxDiffCells bounds the diff's table (old lines × new lines): past it
// the diff is every old line removed and every new one added, which is
// still readable and costs nothing.
const maxDiffCells = 4 << 20

// Diff is a line diff of a and b: each line of the longest common
// subsequence prefixed " ", the others "-" (only in a) or "+" (only in b).
func Diff(a, b string) string {
	x, y := lines(a), lines(b)
	var out strings.Builder
	emit := func(prefix, line string) {
		out.WriteString(prefix)
		out.WriteString(line)
		out.WriteByte('\n')
	}
	if len(x)*len(y) > maxDiffCells {
		for _, l := range x {
			emit("-", l)
		}
		for _, l := range y {
			emit("+", l)
		}
		return out.String()
	}
	// lcs[i][j] is the length of the longest common subsequence of x[i:]
	// and y[j:].
	w := len(y) + 1
	lcs := make([]int32, (len(x)+1)*w)
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i*w+j] = lcs[(i+1)*w+j+1] + 1
			} else {
				lcs[i*w+j] = max(lcs[(i+1)*w+j], lcs[i*w+j+1])
			}
		}
	}
	i, j := 0, 0
	for i < len(x) && j < len(y) {
		switch {
		case x[i] == y[j]:
			emit(" ", x[i])
			i, j = i+1, j+1
		case lcs[(i+1)*w+j] >= lcs[i*w+j+1]:
			emit("-", x[i])
			i++
		default:
			emit("+", y[j])
			j++
		}
	}
	for ; i < len(x); i++ {
		emit("-", x[i])
	}
	for ; j < len(y); j++ {
		emit("+", y[j])
	}
	return out.String()
}

func lines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
