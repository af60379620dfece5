package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/toold/toold/internal/strictjson"
)

// The fast path (issue 17). Most MCP traffic is tools/call, and the SDK's
// stateless handler spends most of a call's CPU on its own work around
// toold's: it decodes the message about a dozen times, each with a fresh
// 32 KiB buffer (garbage the collector then clears), and builds a
// temporary session with its goroutines for one request (see
// docs/performance.md). toold answers the plainest tools/call itself —
// it validates the body once, scans its members in place, builds the
// SDK's CallToolParamsRaw and runs the same handler the SDK would — and
// leaves everything else to the SDK:
//
//   - one JSON-RPC request (no batch), "jsonrpc":"2.0", an id that is a
//     string or an integer, method tools/call, params that decode as the
//     SDK's CallToolParamsRaw, naming a tool toold serves; the request's
//     and the params' members only those, spelt exactly and each once;
//   - a protocol before 2026-07-28 (the header's, or 2025-03-26 without
//     one, as the SDK assumes): a newer client may be asked for input in
//     the result, which needs what the SDK keeps of the request;
//   - no progress token (progress is a stream of notifications), no
//     requestState (a resumption);
//   - Content-Type application/json and an Accept naming both
//     application/json and text/event-stream, no Last-Event-ID, as the
//     SDK requires (a request that breaks a rule gets the SDK's own
//     refusal);
//   - no _meta key of MCP's own namespace ("io.modelcontextprotocol/"):
//     the per-request protocol version the SDK checks against the header
//     (-32020 when they disagree), and the rest of the 2026-07-28 triple;
//   - nesting no deeper than the SDK decodes (sdkMaxDepth), _meta
//     included.
//
// The answer is the JSON-RPC response the SDK would send, as one
// application/json body instead of a one-event stream; Streamable HTTP
// lets the server choose either, and every client reads both.
// TestFastPathAnswersAsTheSDK sends a corpus to both paths and compares
// the decoded answers. One behaviour differs, deliberately: a client that
// hangs up cancels its call here, where the SDK lets an older client's
// call run on (the new protocol cancels in both).

// fastVersions are the protocol versions the fast path answers: the SDK's
// before 2026-07-28 (multiRoundTrip), whatever SDK toold is built with.
var fastVersions = func() map[string]bool {
	m := map[string]bool{}
	for _, v := range mcp.SupportedProtocolVersions() {
		if v < multiRoundTrip {
			m[v] = true
		}
	}
	return m
}()

// defaultVersion is the version the SDK assumes for a request without the
// protocol header.
const defaultVersion = "2025-03-26"

// sdkMaxDepth is the deepest nesting the SDK decodes a message with; a
// deeper one it refuses as a parse error (TestFastPathAnswersAsTheSDK
// holds the two to the same answer at the edge).
const sdkMaxDepth = 1000

// metaNamespace prefixes the _meta keys MCP itself defines.
const metaNamespace = "io.modelcontextprotocol/"

// fastCall is a tools/call the fast path answers.
type fastCall struct {
	id      any // string or int64, as the SDK decodes it
	params  *mcp.CallToolParamsRaw
	version string
	tool    string // the canonical name, which the pipeline knows
}

// key is the call's id as the table of calls in flight keys it: as peek
// keys a cancellation's requestId (idString).
func (c *fastCall) key() string {
	if n, ok := c.id.(int64); ok {
		return idString(float64(n))
	}
	return idString(c.id)
}

// fastCallOf returns the call when the fast path may answer r, whose body
// is body. It reads the body in two passes that allocate nothing, a
// validation and a scan of the members, and decodes only _meta.
func (s *Server) fastCallOf(r *http.Request, body []byte) (*fastCall, bool) {
	if s.opts.NoFastPath {
		return nil, false
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return nil, false
	}
	if !acceptsBoth(r.Header.Values("Accept")) || len(r.Header.Values("Last-Event-ID")) > 0 {
		return nil, false
	}
	version := r.Header.Get("Mcp-Protocol-Version")
	if version == "" {
		version = defaultVersion
	}
	if !fastVersions[version] || !json.Valid(body) || deeperThan(body, sdkMaxDepth) {
		return nil, false
	}
	var req [4][]byte // requestKeys' values
	if !members(body, requestKeys, req[:]) || string(req[0]) != `"2.0"` || string(req[2]) != `"tools/call"` {
		return nil, false
	}
	id, ok := plainID(req[1])
	var par [3][]byte // paramKeys' values
	if !ok || len(req[3]) == 0 || req[3][0] != '{' || !members(req[3], paramKeys, par[:]) {
		return nil, false
	}
	name, ok := plainString(par[0])
	e := s.entry(name)
	if !ok || e == nil {
		return nil, false
	}
	// An alias is called by the name the SDK serves the tool as, as the
	// middleware renames it on the SDK's path.
	p := &mcp.CallToolParamsRaw{Name: e.FunctionName()}
	if par[1] != nil { // copied: the body's buffer is reused once the call is answered
		p.Arguments = append(json.RawMessage(nil), par[1]...)
	}
	if par[2] != nil && (json.Unmarshal(par[2], &p.Meta) != nil || p.GetProgressToken() != nil || mcpMeta(p.Meta)) {
		return nil, false
	}
	return &fastCall{id: id, params: p, version: version, tool: e.Spec.Name}, true
}

// mcpMeta reports whether _meta holds a key of MCP's own namespace.
func mcpMeta(meta mcp.Meta) bool {
	for k := range meta {
		if strings.HasPrefix(k, metaNamespace) {
			return true
		}
	}
	return false
}

// deeperThan reports whether valid JSON nests arrays and objects deeper
// than limit.
func deeperThan(b []byte, limit int) bool {
	depth := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case '{', '[':
			if depth++; depth > limit {
				return true
			}
		case '}', ']':
			depth--
		}
	}
	return false
}

// plainString is a JSON string written without escapes, unquoted.
func plainString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || bytes.IndexByte(raw, '\\') >= 0 {
		return "", false
	}
	return string(raw[1 : len(raw)-1]), true
}

// The members a fast-path request may have, spelt exactly: encoding/json
// matches names without regard to case and keeps the last of a repeated
// name, where the SDK's decoder may not; anything else goes to the SDK.
var (
	requestKeys = []string{"jsonrpc", "id", "method", "params"}
	paramKeys   = []string{"name", "arguments", "_meta"}
)

// members reports whether raw is an object whose members are among
// allowed, spelt exactly and without escapes, each once, storing each
// member's raw value in vals at its name's index in allowed (when vals is
// not nil). It scans the bytes without allocating; raw must be valid JSON
// (json.Valid).
func members(raw []byte, allowed []string, vals [][]byte) bool {
	i := strictjson.SkipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return false
	}
	var seen uint
	i = strictjson.SkipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return true
	}
	for i < len(raw) && raw[i] == '"' {
		end := bytes.IndexByte(raw[i+1:], '"')
		if end < 0 {
			return false
		}
		name := raw[i+1 : i+1+end]
		k := slices.Index(allowed, string(name))
		if k < 0 || seen&(1<<k) != 0 {
			return false // unknown, repeated, or written with an escape
		}
		seen |= 1 << k
		i = strictjson.SkipSpace(raw, i+2+end)
		if i >= len(raw) || raw[i] != ':' {
			return false
		}
		start := strictjson.SkipSpace(raw, i+1)
		end = skipValue(raw, start)
		if vals != nil {
			vals[k] = raw[start:end]
		}
		i = strictjson.SkipSpace(raw, end)
		if i >= len(raw) {
			return false
		}
		switch raw[i] {
		case '}':
			return true
		case ',':
			i = strictjson.SkipSpace(raw, i+1)
		default:
			return false
		}
	}
	return false
}

// skipValue returns the index just past the valid JSON value at i.
func skipValue(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i // the enclosing object's end, after a scalar
			}
			if depth--; depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\n', '\r', ':':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}

// acceptsBoth: an Accept header naming application/json and
// text/event-stream literally (the SDK takes wildcards too; those requests
// go to it).
func acceptsBoth(values []string) (ok bool) {
	var jsonOK, streamOK bool
	for _, v := range values {
		for _, tok := range strings.Split(v, ",") {
			base, _, _ := strings.Cut(tok, ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json":
				jsonOK = true
			case "text/event-stream":
				streamOK = true
			}
		}
	}
	return jsonOK && streamOK
}

// plainID is a JSON-RPC id the fast path echoes as the SDK would: a
// string, or an integer that fits an int64.
func plainID(raw json.RawMessage) (any, bool) {
	if len(raw) == 0 {
		return nil, false
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, false
		}
		return s, true
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || (len(raw) > 1 && raw[0] == '0') || string(raw) == "-0" {
		return nil, false
	}
	return n, true
}

type versionKey struct{}

// protocolVersion is the protocol of a fast-path call ("" for the SDK's
// calls, whose session knows it).
func protocolVersion(ctx context.Context) string {
	v, _ := ctx.Value(versionKey{}).(string)
	return v
}

// serveFast runs the call through the handler the SDK would run and
// answers with the SDK's response: one JSON body, or the last event of the
// stream the handler started by asking the client something (follow.go).
func (s *Server) serveFast(hp *httpPeer, r *http.Request, c *fastCall) {
	ctx := context.WithValue(r.Context(), versionKey{}, c.version)
	res, err := s.handler(c.tool)(ctx, &mcp.CallToolRequest{Params: c.params})
	if err == nil && res != nil && res.Content == nil {
		cp := *res
		cp.Content = []mcp.Content{} // as the SDK: never "content": null
		res = &cp
	}
	var result mcp.Result
	if res != nil {
		result = res
	}
	result, err = s.redacted(result, err)
	body := append(make([]byte, 0, 1024), `{"jsonrpc":"2.0","id":`...)
	switch id := c.id.(type) {
	case string:
		body = strictjson.AppendString(body, id)
	case int64:
		body = strconv.AppendInt(body, id, 10)
	}
	var merr error
	switch res, _ := result.(*mcp.CallToolResult); {
	case err != nil:
		var b []byte
		b, merr = json.Marshal(wireError(err))
		body = append(append(body, `,"error":`...), b...)
	case res != nil:
		body, merr = encodeResult(append(body, `,"result":`...), res)
	default:
		merr = errors.New("the handler returned neither a result nor an error")
	}
	if merr != nil {
		s.log.Error("mcp: encoding a response failed", zap.Error(merr))
		hp.answer(http.StatusInternalServerError, rpcErrorBody(jsonrpc.CodeInternalError, "the response could not be encoded"))
		return
	}
	hp.answer(http.StatusOK, append(body, '}'))
}

// encodeResult appends res: by appendResult, or by encoding/json for a
// shape appendResult does not know.
func encodeResult(dst []byte, res *mcp.CallToolResult) ([]byte, error) {
	n := len(dst)
	if out, ok := appendResult(dst, res); ok {
		return out, nil
	}
	b, err := json.Marshal(res)
	return append(dst[:n], b...), err
}

// appendResult appends res as the SDK encodes it (the same JSON value),
// without reflection, for the shape toold's results have: _meta whose
// values are mostly raw JSON, text content, structured content that is
// raw JSON. It reports false, having appended part of it, for any other
// shape, which the caller then encodes with encoding/json.
// TestResultFields holds the fields it knows to the SDK's.
func appendResult(dst []byte, res *mcp.CallToolResult) ([]byte, bool) {
	if res.InputRequests != nil || res.RequestState != "" {
		return dst, false
	}
	var ok bool
	dst = append(dst, '{')
	if len(res.Meta) > 0 {
		var few [2]string // a success's one key, a failure's two: no allocation
		keys := few[:0]
		for k := range res.Meta {
			keys = append(keys, k)
		}
		slices.Sort(keys) // as encoding/json orders a map
		dst = append(dst, `"_meta":{`...)
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, ok = appendMember(dst, k, res.Meta[k]); !ok {
				return dst, false
			}
		}
		dst = append(dst, "},"...)
	}
	dst = append(dst, `"content":[`...)
	for i, c := range res.Content {
		tc, isText := c.(*mcp.TextContent)
		if !isText || tc.Meta != nil || tc.Annotations != nil {
			return dst, false
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strictjson.AppendString(append(dst, `{"type":"text","text":`...), tc.Text)
		dst = append(dst, '}')
	}
	dst = append(dst, ']')
	if res.StructuredContent != nil {
		if dst, ok = appendValue(append(dst, `,"structuredContent":`...), res.StructuredContent); !ok {
			return dst, false
		}
	}
	if res.IsError {
		dst = append(dst, `,"isError":true`...)
	}
	return append(dst, '}'), true
}

// appendMember appends "k":v.
func appendMember(dst []byte, k string, v any) ([]byte, bool) {
	return appendValue(append(strictjson.AppendString(dst, k), ':'), v)
}

// appendValue appends raw JSON as it is (toold's own encodings, valid and
// compact) and anything else as encoding/json writes it.
func appendValue(dst []byte, v any) ([]byte, bool) {
	if raw, ok := v.(json.RawMessage); ok {
		return append(dst, raw...), len(raw) > 0
	}
	b, err := json.Marshal(v)
	return append(dst, b...), err == nil
}

// wireError is the JSON-RPC error the SDK sends for a handler's error: a
// JSON-RPC error as it is; otherwise the error's message, with the code of
// a JSON-RPC error it wraps (or 0).
func wireError(err error) *jsonrpc.Error {
	var we *jsonrpc.Error
	if errors.As(err, &we) && error(we) == err {
		return we
	}
	out := &jsonrpc.Error{Message: err.Error()}
	if errors.As(err, &we) {
		out.Code = we.Code
	}
	return out
}
