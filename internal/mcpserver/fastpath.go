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
)

// The fast path (issue 17). Most MCP traffic is tools/call, and the SDK's
// stateless handler spends most of a call's CPU on its own work around
// toold's: it decodes the message about a dozen times, each with a fresh
// 32 KiB buffer (garbage the collector then clears), and builds a
// temporary session with its goroutines for one request (see
// docs/performance.md). toold answers the plainest tools/call itself,
// decoding the body once with the SDK's exported types and running the
// same handler the SDK would, and leaves everything else to the SDK:
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
//     application/json and text/event-stream, as the SDK requires (a
//     request that breaks a rule gets the SDK's own refusal).
//
// The answer is the JSON-RPC response the SDK would send, as one
// application/json body instead of a one-event stream; Streamable HTTP
// lets the server choose either, and every client reads both.
// TestFastPathAnswersAsTheSDK sends a corpus to both paths and compares
// the decoded answers. One behaviour differs, deliberately: a client that
// hangs up cancels its call here, where the SDK lets an older client's
// call run on (the new protocol cancels in both).

// fastVersions are the protocol versions the fast path answers: the SDK's
// before 2026-07-28.
var fastVersions = map[string]bool{"2024-11-05": true, "2025-03-26": true, "2025-06-18": true, "2025-11-25": true}

// defaultVersion is the version the SDK assumes for a request without the
// protocol header.
const defaultVersion = "2025-03-26"

// fastCall is a tools/call the fast path answers.
type fastCall struct {
	id      any // string or int64, as the SDK decodes it
	params  *mcp.CallToolParamsRaw
	version string
}

// rpcRequest is a JSON-RPC request as the fast path reads it.
type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// fastCallOf returns the call when the fast path may answer r, whose body
// decoded as req.
func (s *Server) fastCallOf(r *http.Request, body []byte, req *rpcRequest) (*fastCall, bool) {
	if s.opts.NoFastPath || req.JSONRPC != "2.0" || req.Method != "tools/call" {
		return nil, false
	}
	if !plainKeys(body, requestKeys) {
		return nil, false
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return nil, false
	}
	if !acceptsBoth(r.Header.Values("Accept")) {
		return nil, false
	}
	version := r.Header.Get("Mcp-Protocol-Version")
	if version == "" {
		version = defaultVersion
	}
	if !fastVersions[version] {
		return nil, false
	}
	id, ok := plainID(req.ID)
	if !ok || len(req.Params) == 0 || req.Params[0] != '{' || !plainKeys(req.Params, paramKeys) {
		return nil, false
	}
	var p mcp.CallToolParamsRaw
	if json.Unmarshal(req.Params, &p) != nil || p.RequestState != "" || p.GetProgressToken() != nil || !s.serves(p.Name) {
		return nil, false
	}
	return &fastCall{id: id, params: &p, version: version}, true
}

// The members a fast-path request may have, spelt exactly: encoding/json
// matches names without regard to case and keeps the last of a repeated
// name, where the SDK's decoder may not; anything else goes to the SDK.
var (
	requestKeys = map[string]bool{"jsonrpc": true, "id": true, "method": true, "params": true}
	paramKeys   = map[string]bool{"name": true, "arguments": true, "_meta": true}
)

// plainKeys: raw is an object whose members are among allowed, spelt
// exactly, each once.
func plainKeys(raw []byte, allowed map[string]bool) bool {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	var seen [4]string
	n := 0
	for dec.More() {
		t, err := dec.Token()
		k, _ := t.(string)
		if err != nil || !allowed[k] || n == len(seen) || slices.Contains(seen[:n], k) {
			return false
		}
		seen[n] = k
		n++
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return false
		}
	}
	return true
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

func (s *Server) serves(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.served[name] != nil
}

type versionKey struct{}

// protocolVersion is the protocol of a fast-path call ("" for the SDK's
// calls, whose session knows it).
func protocolVersion(ctx context.Context) string {
	v, _ := ctx.Value(versionKey{}).(string)
	return v
}

// serveFast runs the call through the handler the SDK would run and
// answers with the SDK's response.
func (s *Server) serveFast(w http.ResponseWriter, r *http.Request, c *fastCall) {
	ctx := context.WithValue(r.Context(), versionKey{}, c.version)
	res, err := s.handler(c.params.Name)(ctx, &mcp.CallToolRequest{Params: c.params})
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
	out := struct {
		JSONRPC string         `json:"jsonrpc"`
		ID      any            `json:"id"`
		Result  mcp.Result     `json:"result,omitempty"`
		Error   *jsonrpc.Error `json:"error,omitempty"`
	}{JSONRPC: "2.0", ID: c.id}
	if err != nil {
		out.Error = wireError(err)
	} else {
		out.Result = result
	}
	body, merr := json.Marshal(out)
	if merr != nil {
		s.log.Error("mcp: encoding a response failed")
		writeRPCError(w, http.StatusInternalServerError, jsonrpc.CodeInternalError, "the response could not be encoded")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
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
