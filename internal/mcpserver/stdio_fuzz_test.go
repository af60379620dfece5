package mcpserver

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

// FuzzStdioFilter: whatever the lines, the filter answers, takes or passes
// each one, and everything it answers is a JSON-RPC error on one line.
func FuzzStdioFilter(f *testing.F) {
	f.Add("not json\n{}\n[]\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n")
	f.Add("\r\n\n[{\"jsonrpc\":\"2.0\",\"method\":\"x\"}]\n{\"id\":\"a\"}")
	f.Fuzz(func(t *testing.T, in string) {
		var out strings.Builder
		// No SDK reads what is passed on: the drain at the end of input
		// gives up at once.
		s := &Server{asks: newAsks(), log: zap.NewNop(), opts: Options{StdioDrain: time.Nanosecond}}
		r := newStdioSession(s, &out).filter(context.Background(), strings.NewReader(in), 256)
		passed, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSuffix(string(passed), "\n"), "\n") {
			if l != "" && !isMessage([]byte(l)) {
				t.Fatalf("passed on %q", l)
			}
		}
		for _, l := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
			if l == "" {
				continue
			}
			var e struct {
				JSONRPC string
				Error   struct{ Code int }
			}
			if json.Unmarshal([]byte(l), &e) != nil || e.JSONRPC != "2.0" || (e.Error.Code != -32700 && e.Error.Code != -32600) {
				t.Fatalf("answered %q", l)
			}
		}
	})
}
