package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/toold/toold/internal/mcpserver"
)

// TestStdioAnswersBadLines: over stdio, a line that is not JSON is
// answered -32700 and one that is JSON but no message -32600 (with its id
// when it has one), as JSON-RPC says; the session goes on and answers the
// next good line.
func TestStdioAnswersBadLines(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- h.mcp.ServeStdio(ctx, sr, sw) }()

	long := `{"jsonrpc":"2.0","id":9,"method":"ping","params":{"pad":"` + strings.Repeat("x", mcpserver.DefaultMaxBodyBytes) + `"}}`
	lines := []string{
		"not json at all",
		"",
		`{"id": 7, "hello": "world"}`,
		`[]`,
		`{"jsonrpc":"2.0","id":1,"method":`,
		long,
		`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
	}
	go func() {
		for _, l := range lines {
			if _, err := io.WriteString(cw, l+"\n"); err != nil {
				return
			}
		}
	}()
	want := []struct {
		id   string
		code int
	}{{"null", -32700}, {"7", -32600}, {"null", -32600}, {"null", -32700}, {"null", -32700}}
	sc := bufio.NewScanner(cr)
	sc.Buffer(nil, 1<<20)
	for i := 0; i <= len(want); i++ {
		if !sc.Scan() {
			t.Fatalf("answer %d: %v", i, sc.Err())
		}
		var got struct {
			ID     json.RawMessage
			Error  *struct{ Code int }
			Result json.RawMessage
		}
		if err := json.Unmarshal(sc.Bytes(), &got); err != nil {
			t.Fatalf("answer %d is not JSON: %s", i, sc.Bytes())
		}
		if i == len(want) {
			if string(got.ID) != "2" || got.Result == nil {
				t.Errorf("the good line after the bad ones: %s", sc.Bytes())
			}
			break
		}
		if got.Error == nil || got.Error.Code != want[i].code || string(got.ID) != want[i].id {
			t.Errorf("answer %d: %s, want code %d and id %s", i, sc.Bytes(), want[i].code, want[i].id)
		}
	}
	cw.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeStdio: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("ServeStdio did not return when stdin closed")
	}
}
