package strictjson

import (
	"encoding/json"
	"testing"
)

// FuzzAppendString: AppendString writes valid JSON that decodes to what
// encoding/json's encoding of the same string decodes to.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "\f\b", "quote\"back\\slash", "\x00\x1f\x7f", "<>&", "\u2028\u2029", "\xff\xfe", "é日本"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := AppendString(nil, s)
		var g, w string
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("AppendString(%q) = %s: not JSON: %v", s, got, err)
		}
		ref, _ := json.Marshal(s)
		if err := json.Unmarshal(ref, &w); err != nil {
			t.Fatal(err)
		}
		if g != w {
			t.Fatalf("AppendString(%q) decodes to %q, encoding/json's to %q", s, g, w)
		}
	})
}
