package mcpserver_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toold/toold/internal/tools"
)

// TestFastPathAnswersAsTheSDK: the same requests, sent to a toold whose
// /mcp answers the plainest tools/call itself and to one that leaves every
// request to the SDK, get the same HTTP status and the same JSON-RPC
// answer (decoded, with what differs from call to call — request ids,
// timings, confirmation tokens, execution ids — masked). The corpus covers
// every protocol version, both kinds of id, results and failures of every
// kind the handler gives, and the requests the fast path must leave to
// the SDK (it then answers them in both servers alike).
func TestFastPathAnswersAsTheSDK(t *testing.T) {
	fast := newHarness(t, harnessOpts{keys: true, store: true})
	sdk := newHarness(t, harnessOpts{keys: true, store: true, noFast: true})
	for _, h := range []*harness{fast, sdk} {
		if errs := h.live.SetSource("up", []tools.Tool{upTool{}}); errs != nil {
			t.Fatal(errs)
		}
	}
	call := func(id, params string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":` + params + `}`
	}
	echo := `{"name":"echo","arguments":{"message":"hi <b>&amp;</b> é","data":{"n":1}}}`
	both := "application/json, text/event-stream"
	deep := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	cases := []struct {
		name, body, version, accept, contentType, key string
		fastPath                                      bool // the fast path answers it
		header                                        map[string]string
		// sdkID is the id the SDK answers where it differs from the one
		// sent (a deliberate divergence, docs/mcp.md): the SDK reads an
		// id as a float64, so an integer past 2^53 comes back changed;
		// the fast path echoes it exactly.
		sdkID string
	}{
		{"no version header", call("1", echo), "", both, "", fullKey, true, nil, ""},
		{"2024-11-05", call("2", echo), "2024-11-05", both, "", fullKey, true, nil, ""},
		{"2025-03-26", call("3", echo), "2025-03-26", both, "", fullKey, true, nil, ""},
		{"2025-06-18", call("4", echo), "2025-06-18", both, "", fullKey, true, nil, ""},
		{"2025-11-25", call("5", echo), "2025-11-25", both, "", fullKey, true, nil, ""},
		{"string id", call(`"a\u00e9"`, echo), "2025-06-18", both, "", fullKey, true, nil, ""},
		{"large id", call("9007199254740993", echo), "2025-06-18", both, "", fullKey, true, nil, "9007199254740992"},
		{"2^53", call("9007199254740992", echo), "2025-06-18", both, "", fullKey, true, nil, ""},
		{"max int64", call("9223372036854775807", echo), "2025-06-18", both, "", fullKey, true, nil, "-9223372036854775808"},
		{"min int64", call("-9223372036854775808", echo), "2025-06-18", both, "", fullKey, true, nil, ""},
		{"a tool by its canonical name", call("42", `{"name":"up.ping","arguments":{}}`), "2025-06-18", both, "", fullKey, true, nil, ""},
		{"a tool by its MCP name", call("43", `{"name":"up__ping","arguments":{}}`), "2025-06-18", both, "", fullKey, true, nil, ""},
		{"_meta at the SDK's depth", call("44", `{"name":"echo","arguments":{"message":"m"},"_meta":`+deep(998)+`}`), "2025-06-18", both, "", fullKey, true, nil, ""},
		{"negative id", call("-7", echo), "2025-06-18", both, "", fullKey, true, nil, ""},
		{"zero id", call("0", echo), "2025-06-18", both, "", fullKey, true, nil, ""},
		{"accept with parameters", call("6", echo), "2025-06-18", "application/json;q=0.9, text/event-stream;q=1", "", fullKey, true, nil, ""},
		{"content type with charset", call("7", echo), "2025-06-18", both, "application/json; charset=utf-8", fullKey, true, nil, ""},
		{"validation error", call("8", `{"name":"echo","arguments":{"message":5}}`), "2025-06-18", both, "", fullKey, true, nil, ""},
		{"no arguments", call("9", `{"name":"echo"}`), "2025-06-18", both, "", fullKey, true, nil, ""},
		{"arguments null", call("10", `{"name":"echo","arguments":null}`), "2025-06-18", both, "", fullKey, true, nil, ""},
		{"arguments an array", call("11", `{"name":"echo","arguments":[1]}`), "2025-06-18", both, "", fullKey, true, nil, ""},
		{"tool error", call("12", `{"name":"fail","arguments":{}}`), "2025-06-18", both, "", fullKey, true, nil, ""},
		{"confirmation by token", call("13", `{"name":"danger","arguments":{"what":"x"}}`), "2025-06-18", both, "", fullKey, true, nil, ""},
		{"a key that may not use it", call("14", `{"name":"fail","arguments":{}}`), "2025-06-18", both, "", echoKey, true, nil, ""},
		{"human approval", call("15", `{"name":"guarded","arguments":{}}`), "2025-06-18", both, "", fullKey, true, nil, ""},
		{"fallback asks the user", call("16", `{"name":"ask_first","arguments":{}}`), "2025-06-18", both, "", fullKey, true, nil, ""},
		{"traceparent in _meta", call("17", `{"name":"echo","arguments":{"message":"m"},"_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}`), "2025-06-18", both, "", fullKey, true, nil, ""},
		// Left to the SDK.
		{"escaped method", `{"jsonrpc":"2.0","id":18,"method":"tools\/call","params":` + echo + `}`, "2025-06-18", both, "", fullKey, false, nil, ""},
		{"escaped tool name", call("25", `{"name":"ech\u006f","arguments":{"message":"m"}}`), "2025-06-18", both, "", fullKey, false, nil, ""},
		{"jsonrpc written with an escape", `{"jsonrpc":"2\u002e0","id":26,"method":"tools/call","params":` + echo + `}`, "2025-06-18", both, "", fullKey, false, nil, ""},
		{"2026-07-28", call("30", echo), "2026-07-28", both, "", fullKey, false, nil, ""},
		{"unsupported version", call("31", echo), "1999-01-01", both, "", fullKey, false, nil, ""},
		{"progress token", call("32", `{"name":"echo","arguments":{"message":"m"},"_meta":{"progressToken":"p"}}`), "2025-06-18", both, "", fullKey, false, nil, ""},
		{"unknown tool", call("33", `{"name":"nope","arguments":{}}`), "2025-06-18", both, "", fullKey, false, nil, ""},
		{"float id", call("1.5", echo), "2025-06-18", both, "", fullKey, false, nil, ""},
		{"null id", call("null", echo), "2025-06-18", both, "", fullKey, false, nil, ""},
		{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":34,"method":"tools/call","params":` + echo + `}`, "2025-06-18", both, "", fullKey, false, nil, ""},
		{"batch", "[" + call("35", echo) + "]", "2025-06-18", both, "", fullKey, false, nil, ""},
		{"params not an object", call("36", `[1]`), "2025-06-18", both, "", fullKey, false, nil, ""},
		{"name not a string", call("37", `{"name":5}`), "2025-06-18", both, "", fullKey, false, nil, ""},
		{"accept wildcard", call("38", echo), "2025-06-18", "*/*", "", fullKey, false, nil, ""},
		{"accept json only", call("39", echo), "2025-06-18", "application/json", "", fullKey, false, nil, ""},
		{"content type text", call("40", echo), "2025-06-18", both, "text/plain", fullKey, false, nil, ""},
		{"fields in other case", `{"JSONRPC":"2.0","ID":19,"Method":"tools/call","Params":` + echo + `}`, "2025-06-18", both, "", fullKey, false, nil, ""},
		{"method in other case", `{"jsonrpc":"2.0","id":19,"Method":"tools/call","params":` + echo + `}`, "2025-06-18", both, "", fullKey, false, nil, ""},
		{"params name in other case", call("20", `{"Name":"echo","arguments":{"message":"m"}}`), "2025-06-18", both, "", fullKey, false, nil, ""},
		{"unknown params field", call("21", `{"name":"echo","arguments":{"message":"m"},"extra":1}`), "2025-06-18", both, "", fullKey, false, nil, ""},
		{"repeated method", `{"jsonrpc":"2.0","id":22,"method":"tools/list","method":"tools/call","params":` + echo + `}`, "2025-06-18", both, "", fullKey, false, nil, ""},
		{"repeated name", call("23", `{"name":"fail","name":"echo","arguments":{"message":"m"}}`), "2025-06-18", both, "", fullKey, false, nil, ""},
		{"extra member", `{"jsonrpc":"2.0","id":24,"method":"tools/call","params":` + echo + `,"x":1}`, "2025-06-18", both, "", fullKey, false, nil, ""},
		{"request state", call("41", `{"name":"echo","arguments":{"message":"m"},"requestState":"x"}`), "2025-06-18", both, "", fullKey, false, nil, ""},
		// The audit of issue 25: each must get the SDK's answer.
		{"_meta protocol version against the header", call("45", `{"name":"echo","arguments":{"message":"m"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`), "2025-06-18", both, "", fullKey, false, nil, ""},
		{"_meta protocol version without a header", call("46", `{"name":"echo","arguments":{"message":"m"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-06-18"}}`), "", both, "", fullKey, false, nil, ""},
		{"_meta 5,000 levels deep", call("47", `{"name":"echo","arguments":{"message":"m"},"_meta":`+deep(5000)+`}`), "2025-06-18", both, "", fullKey, false, nil, ""},
		{"_meta past the SDK's depth", call("48", `{"name":"echo","arguments":{"message":"m"},"_meta":`+deep(999)+`}`), "2025-06-18", both, "", fullKey, false, nil, ""},
		{"Last-Event-ID on a POST", call("49", echo), "2025-06-18", both, "", fullKey, false, map[string]string{"Last-Event-ID": "1_1"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs, fct, fb := postWith(t, fast.url, c.body, c.version, c.accept, c.contentType, c.key, c.header)
			ss, _, sb := postWith(t, sdk.url, c.body, c.version, c.accept, c.contentType, c.key, c.header)
			if fs != ss {
				t.Fatalf("status: fast path %d, SDK %d\nfast: %s\nsdk:  %s", fs, ss, fb, sb)
			}
			if answered := fct == "application/json" && fs == 200; answered != c.fastPath {
				t.Errorf("answered by the fast path: %v (Content-Type %s), want %v", answered, fct, c.fastPath)
			}
			fm, sm := masked(t, fb), masked(t, sb)
			if c.sdkID != "" {
				// The deliberate divergence: the fast path echoes the id
				// sent, the SDK one rounded through a float64.
				sent := strings.TrimSuffix(strings.TrimPrefix(c.body, `{"jsonrpc":"2.0","id":`), c.body[strings.Index(c.body, `,"method"`):])
				if got := idOf(fm); got != sent {
					t.Errorf("the fast path answered id %s to id %s", got, sent)
				}
				if got := idOf(sm); got != c.sdkID {
					t.Errorf("the SDK answered id %s, not %s: the divergence docs/mcp.md lists is gone", got, c.sdkID)
				}
				delete(fm.(map[string]any), "id")
				delete(sm.(map[string]any), "id")
			}
			if diff := cmp.Diff(sm, fm); diff != "" {
				t.Errorf("answers differ (-sdk +fast):\n%s", diff)
			}
		})
	}
}

// post sends one /mcp request and returns the status, the Content-Type
// and the JSON-RPC message of the answer (the data of an event stream's
// message event, or the body).
func post(t *testing.T, url, body, version, accept, contentType, key string) (int, string, []byte) {
	t.Helper()
	return postWith(t, url, body, version, accept, contentType, key, nil)
}

// postWith is post with more headers.
func postWith(t *testing.T, url, body, version, accept, contentType, key string, header map[string]string) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType == "" {
		contentType = "application/json"
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Accept", accept)
	req.Header.Set("Authorization", "Bearer "+key)
	if version != "" {
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	ct := resp.Header.Get("Content-Type")
	if strings.HasPrefix(ct, "text/event-stream") {
		var data []byte
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				data = append(data, d...)
			}
		}
		b = data
	}
	return resp.StatusCode, ct, b
}

// volatile matches what differs between two answers to the same call:
// ids, tokens, times, and a token's time left ("within 4m59s").
var volatile = regexp.MustCompile(`\b[0-9a-f]{24,32}\b|[0-9A-Za-z_-]{40,}|\d{4}-\d\d-\d\dT[0-9:.]+Z|\b\d+m\d+(\.\d+)?s\b`)

// idOf is the id of a decoded answer, as written.
func idOf(v any) string {
	m, _ := v.(map[string]any)
	switch id := m["id"].(type) {
	case json.Number:
		return id.String()
	case nil:
		return "null"
	default:
		b, _ := json.Marshal(id)
		return string(b)
	}
}

// masked is a JSON answer decoded (numbers as written, so ids compare
// exactly), with the envelope's timings and every id, token and time
// masked; a body that is not JSON is its text.
func masked(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return strings.TrimSpace(string(b))
	}
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				switch k {
				case "duration_ms", "timing", "queued_ms", "execute_ms", "sanitize_ms":
					x[k] = "masked"
				default:
					x[k] = walk(e)
				}
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		case string:
			return volatile.ReplaceAllString(x, "X")
		}
		return v
	}
	return walk(v)
}

// FuzzFastPath: any body, sent to both servers (in process), gets the same
// status and the same answer, whichever path takes it.
func FuzzFastPath(f *testing.F) {
	_, fast := newStack(f, harnessOpts{keys: true})
	_, sdk := newStack(f, harnessOpts{keys: true, noFast: true})
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`,
		`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"fail","arguments":{},"_meta":{"a":1}}}`,
		`{"jsonrpc":"2.0","id":-3,"method":"tools/call","params":{"name":"danger","arguments":{"what":"x"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"message":5}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools\/call","params":{"name":"echo"}}`,
	} {
		f.Add(s, "2025-06-18")
		f.Add(s, "")
	}
	f.Fuzz(func(t *testing.T, body, version string) {
		answer := func(h http.Handler) (int, any) {
			req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Authorization", "Bearer "+fullKey)
			if version != "" && !strings.ContainsAny(version, "\r\n\x00") {
				req.Header.Set("Mcp-Protocol-Version", version)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			b := rec.Body.Bytes()
			if strings.HasPrefix(rec.Header().Get("Content-Type"), "text/event-stream") {
				var data []byte
				for _, line := range strings.Split(string(b), "\n") {
					if d, ok := strings.CutPrefix(line, "data: "); ok {
						data = append(data, d...)
					}
				}
				b = data
			}
			return rec.Code, bigIDMasked(masked(t, b))
		}
		fs, fb := answer(fast)
		ss, sb := answer(sdk)
		if fs != ss {
			t.Fatalf("status: fast path %d, SDK %d\nfast: %v\nsdk:  %v", fs, ss, fb, sb)
		}
		if diff := cmp.Diff(sb, fb); diff != "" {
			t.Fatalf("answers differ (-sdk +fast):\n%s", diff)
		}
	})
}

// bigIDMasked masks an integer id past 2^53, which the SDK rounds and the
// fast path does not (the divergence TestFastPathAnswersAsTheSDK checks).
func bigIDMasked(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	if n, ok := m["id"].(json.Number); ok {
		if i, err := strconv.ParseInt(n.String(), 10, 64); err != nil || i > 1<<53 || i < -(1<<53) {
			m["id"] = "beyond 2^53"
		}
	}
	return v
}

// TestResultFields: the fast path's encoder of a result (appendResult)
// knows every field of the SDK's CallToolResult; an SDK that adds one
// fails here until the encoder learns it.
func TestResultFields(t *testing.T) {
	var got []string
	rt := reflect.TypeFor[mcp.CallToolResult]()
	for i := range rt.NumField() {
		if f := rt.Field(i); f.IsExported() {
			got = append(got, f.Name)
		}
	}
	want := []string{"Meta", "Content", "StructuredContent", "IsError", "InputRequests", "RequestState"}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("CallToolResult's fields are %v; appendResult knows %v", got, want)
	}
}
