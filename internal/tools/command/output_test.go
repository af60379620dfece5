package command

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/toold/toold/internal/launch"
	"github.com/toold/toold/internal/tools"
)

func TestParse(t *testing.T) {
	cases := []struct {
		mode, stdout string
		parsed       any
		perr         bool
	}{
		{"json", `{"a":1}`, map[string]any{"a": jsonNumber("1")}, false},
		{"json", `{"a":1} {}`, nil, true},
		{"json", `nope`, nil, true},
		{"json", "", nil, false},
		{"lines", "a\nb\n", []string{"a", "b"}, false},
		{"lines", "", []string{}, false},
		{"text", "a", nil, false},
	}
	for _, c := range cases {
		r := &Result{Result: launch.Result{Stdout: c.stdout}}
		r.parse(c.mode)
		if diff := cmp.Diff(c.parsed, r.Parsed); diff != "" || (r.ParseError != "") != c.perr {
			t.Errorf("%s %q: %s parse error %q", c.mode, c.stdout, diff, r.ParseError)
		}
	}
}

func jsonNumber(s string) any { return json.Number(s) }

func TestOutputIsStreamed(t *testing.T) {
	s, _ := newSet(t, launch.ModeNone, Config{Tools: []ToolConfig{argvTool("p", "sh", "-c", `printf 'a\303'; sleep 0.05; printf '\251b'; echo err >&2`)}})
	var mu sync.Mutex
	got := map[string]string{}
	c := tools.NewCall([]byte(`{}`), "r", "c", func(ch tools.Chunk) {
		mu.Lock()
		defer mu.Unlock()
		if !utf8.ValidString(ch.Data) {
			t.Errorf("chunk %q is not UTF-8", ch.Data)
		}
		got[ch.Stream] += ch.Data
	})
	out, err := tool(t, s, "p").Execute(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	r := out.(*Result)
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(map[string]string{"stdout": "aéb", "stderr": "err\n"}, got); diff != "" || r.Stdout != "aéb" {
		t.Errorf("streamed (-want +got):\n%s\nresult %+v", diff, r)
	}
}
