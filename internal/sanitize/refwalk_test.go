package sanitize

import (
	"bytes"
	"encoding/json"
	"testing"
)

// referenceOutput is the obviously correct walk the fast one (outWalker)
// is held to where nothing is redacted: decode the document with
// encoding/json, repair every string (keys too) with cleanAll, and write
// the tree again. ok is false for a document that is not valid JSON.
func referenceOutput(data []byte, strip bool) (v any, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if !json.Valid(data) || dec.Decode(&v) != nil {
		return nil, false
	}
	return refClean(v, strip), true
}

func refClean(v any, strip bool) any {
	switch x := v.(type) {
	case string:
		s, _ := cleanAll(x, strip)
		return s
	case []any:
		for i := range x {
			x[i] = refClean(x[i], strip)
		}
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			ck, _ := cleanAll(k, strip)
			m[ck] = refClean(e, strip)
		}
		return m
	}
	return v
}

// sameAsReference fails unless out decodes to the reference's tree.
func sameAsReference(t *testing.T, in, out []byte, want any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	var got any
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("invalid output %q: %v", out, err)
	}
	w, _ := json.Marshal(want)
	g, _ := json.Marshal(got)
	if !bytes.Equal(w, g) {
		t.Fatalf("the walk differs from the reference walk for %q:\n got %q\nwant %q", in, g, w)
	}
}
