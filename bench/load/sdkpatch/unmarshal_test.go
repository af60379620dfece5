package sdkpatch

import (
	"bytes"
	stdjson "encoding/json"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// wireMsg has the shape of the SDK's internal JSON-RPC wire message, the
// first thing it decodes from a request.
type wireMsg struct {
	VersionTag string                `json:"jsonrpc"`
	ID         any                   `json:"id,omitempty"`
	Method     string                `json:"method,omitempty"`
	Params     stdjson.RawMessage    `json:"params,omitempty"`
	Result     stdjson.RawMessage    `json:"result,omitempty"`
	Error      *struct{ Code int64 } `json:"error,omitempty"`
}

// targets are fresh values of the types the SDK decodes into on a
// request's way: the wire message, a batch, params, a tool's arguments.
func targets() []func() any {
	return []func() any{
		func() any { return new(wireMsg) },
		func() any { return new([]stdjson.RawMessage) },
		func() any { return new(stdjson.RawMessage) },
		func() any { return new(map[string]any) },
		func() any { return new(any) },
		func() any { return new(mcp.CallToolParams) },
		func() any { return new(mcp.InitializeParams) },
		func() any { return new(mcp.ListToolsParams) },
		func() any { return new(struct{ Message string }) },
	}
}

// same decodes data with both functions into each target and fails on any
// difference in the value or the error.
func same(t *testing.T, data []byte) {
	t.Helper()
	for _, mk := range targets() {
		a, b := mk(), mk()
		// Each decodes its own copy, overwritten afterwards: a value that
		// aliased its input (the SDK's callers reuse their buffers) shows.
		da, db := bytes.Clone(data), bytes.Clone(data)
		errA, errB := OldUnmarshal(da, a), Unmarshal(db, b)
		for i := range da {
			da[i], db[i] = 'X', 'X'
		}
		if (errA == nil) != (errB == nil) || (errA != nil && errA.Error() != errB.Error()) {
			t.Fatalf("%T from %q: error %v (SDK) vs %v (patched)", a, data, errA, errB)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%T from %q: %#v (SDK) vs %#v (patched)", a, data, a, b)
		}
	}
}

var corpus = []string{
	// Requests as clients send them, each protocol version.
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello, toold","data":{"n":1,"tags":["a","b"]}}}}`,
	`{"jsonrpc":"2.0","id":"abc","method":"tools/list","params":{}}`,
	`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
	`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`,
	`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{"roots":{"listChanged":true}},"clientInfo":{"name":"c","version":"1"}}}`,
	`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"elicitation":{}},"clientInfo":{"name":"c","version":"1"}}}`,
	`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`,
	`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","arguments":{},"_meta":{"progressToken":"p1","io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"user"}}`,
	`{"jsonrpc":"2.0","id":9,"result":{"action":"accept","content":{"ok":true}}}`,
	`{"jsonrpc":"2.0","id":9,"error":{"code":-32601,"message":"no"}}`,
	`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`,
	// Whitespace, escapes, unicode, case games with field names.
	" \t\r\n{\"jsonrpc\" : \"2.0\" , \"id\" : 1 , \"method\" : \"ping\" }\n\n",
	`{"JSONRPC":"2.0","Id":1,"METHOD":"ping","Message":"m","message":"n"}`,
	`{"message":"\u00e9\u2028\ud83d\ude00 \"quoted\" \\ back","data":{"k":[1,2.5,-3e10,true,false,null]}}`,
	`{"message":"caf` + "\xc3\xa9" + `","x":"` + "\xff\xfe" + `"}`,
	`{"id":1e400}`, `{"id":-0}`, `{"id":12345678901234567890}`, `{"id":null}`, `{"id":[1]}`, `{"id":{"a":1}}`,
	`"just a string"`, `42`, `true`, `null`, `[]`, `{}`,
	// Invalid: each must fail the same way.
	``, ` `, `{`, `}`, `{"a"`, `{"a":}`, `{"a":1,}`, `[1,]`, `{"a":1}x`, `{"a":1} {"b":2}`, `{"a":1}]`,
	`{'a':1}`, `{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":+1}`, `{"a":tru}`, `{"a":"\x"}`, `{"a":"` + "\x01" + `"}`,
	`{"jsonrpc":2,"id":1,"method":"ping"}`, `{"jsonrpc":"2.0","id":true,"method":["x"]}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1,2]}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"x"}`,
	strings.Repeat("[", 1001) + strings.Repeat("]", 1001),
	strings.Repeat(`{"a":`, 999) + "1" + strings.Repeat("}", 999),
}

// The patched Unmarshal decodes every request of the corpus exactly as the
// SDK's does: the same value, the same error.
func TestUnmarshalSameAsSDK(t *testing.T) {
	for _, c := range corpus {
		same(t, []byte(c))
	}
	// Larger than the Decoder's 32 KiB buffer: it reads in several steps.
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"` +
		strings.Repeat("x", 100<<10) + `"}}}`
	same(t, []byte(big))
	same(t, []byte(big[:len(big)-1]))
}

// The point of the patch: no 32 KiB buffer per value.
func TestUnmarshalAllocatesLess(t *testing.T) {
	data := []byte(corpus[0])
	perCall := func(f func([]byte, any) error) uint64 {
		const n = 200
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range n {
			var w wireMsg
			if err := f(data, &w); err != nil {
				t.Fatal(err)
			}
		}
		runtime.ReadMemStats(&after)
		return (after.TotalAlloc - before.TotalAlloc) / n
	}
	old, patched := perCall(OldUnmarshal), perCall(Unmarshal)
	t.Logf("bytes allocated per call: SDK %d, patched %d", old, patched)
	if patched >= 4<<10 || old < 32<<10 {
		t.Errorf("bytes per call: SDK %d, patched %d; want the SDK's 32 KiB buffer gone", old, patched)
	}
}

func FuzzUnmarshal(f *testing.F) {
	for _, c := range corpus {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		same(t, data)
		// The same document with whitespace around it, and with a tail.
		same(t, append(append([]byte(" \n"), data...), '\t'))
		same(t, append(bytes.Clone(data), `{}`...))
	})
}
