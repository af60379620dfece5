package encodetest

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

type inner struct {
	A string `json:"a,omitempty"`
	B int    `json:"b"`
}

type sample struct {
	S      string            `json:"s,omitempty"`
	T      time.Time         `json:"t"`
	Raw    json.RawMessage   `json:"raw,omitempty"`
	Ptr    *inner            `json:"ptr,omitempty"`
	List   []inner           `json:"list,omitempty"`
	Names  []string          `json:"names,omitempty"`
	M      map[string]int    `json:"m,omitempty"`
	Any    any               `json:"any,omitempty"`
	F      float64           `json:"f,omitempty"`
	U      uint64            `json:"u,omitempty"`
	Hidden string            `json:"-"`
	Named  map[string]string `json:"named,omitempty"`
	hidden string
}

// TestLeavesAndVariants: every field encoding/json writes is a leaf,
// followed into structs, pointers and slices of structs; "every field"
// fills them all (encoding/json writes each); "only X" fills X alone.
func TestLeavesAndVariants(t *testing.T) {
	var paths []string
	for _, f := range Leaves(t, reflect.TypeFor[sample]()) {
		paths = append(paths, f.Path)
	}
	want := "S T Raw Ptr.A Ptr.B List[0].A List[0].B Names M Any F U Named"
	if got := strings.Join(paths, " "); got != want {
		t.Errorf("leaves %q, want %q", got, want)
	}
	vs := Variants[sample](t, "Named")
	if len(vs) != 1+2*12 {
		t.Fatalf("%d variants", len(vs))
	}
	b, _ := json.Marshal(vs[0].Value)
	for _, k := range []string{`"s":`, `"raw":{"f":2}`, `"ptr":{"a":`, `"list":[{"a":`, `"names":["v`, `"m":{"k`, `"any":"v`, `"f":`, `"u":`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("every field: %s lacks %s", b, k)
		}
	}
	if strings.Contains(string(b), `"named"`) {
		t.Errorf("a skipped field was filled: %s", b)
	}
	for _, v := range vs[1:] {
		b, _ := json.Marshal(v.Value)
		if strings.HasPrefix(v.Name, "only Ptr.B") && string(b) != `{"t":"0001-01-01T00:00:00Z","ptr":{"b":5}}` {
			t.Errorf("%s: %s", v.Name, b)
		}
		if v.Name == "all but S" && strings.Contains(string(b), `"s":`) {
			t.Errorf("%s: %s", v.Name, b)
		}
	}
}
