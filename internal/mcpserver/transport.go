package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"
	"go.uber.org/zap/zapcore"

	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/reqbody"
)

// sdkLogger hands the SDK toold's logger from warn up: at info it reports
// every stateless request's temporary session.
func sdkLogger(log *zap.Logger) *slog.Logger {
	core := log.Named("sdk").Core()
	if c, err := zapcore.NewIncreaseLevelCore(core, zapcore.WarnLevel); err == nil {
		core = c
	}
	return slog.New(zapslog.NewHandler(core))
}

// DefaultMaxBodyBytes caps an MCP request body when none is configured.
const DefaultMaxBodyBytes = 1 << 20

// Handler serves MCP's Streamable HTTP transport, stateless: no session is
// kept between requests, so any replica behind a plain Service answers any
// request. toold's own origin, host and key checks run before it (the same
// as for REST), so the SDK's localhost protection is off here: one rule,
// not two that could disagree.
//
// A stateless server cannot match a notifications/cancelled, which arrives
// in a request of its own, to the call it names; toold keeps a table of
// its calls in flight, keyed by caller and JSON-RPC id, and cancels the one
// named. For that the handler reads the id of a tools/call before the SDK
// does. (A 2026-07-28 client cancels by closing the request's stream, which
// the SDK propagates.)
func (s *Server) Handler() http.Handler { return s.handlerFor(s.sdk, nil) }

// handlerFor serves sdk, the whole catalog's server or a toolset's (set);
// a toolset's requests all go to the SDK, and carry the toolset in their
// context so its calls see only its tools.
func (s *Server) handlerFor(sdk *mcp.Server, set *registry.Toolset) http.Handler {
	max := s.opts.MaxBodyBytes
	if max <= 0 {
		max = DefaultMaxBodyBytes
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return sdk }, &mcp.StreamableHTTPOptions{
		Stateless:                    true,
		DisableLocalhostProtection:   true,
		MaxRequestBodyBytes:          max,
		PropagateRequestCancellation: true,
		Logger:                       sdkLogger(s.log),
	})
	bodies := s.opts.Bodies
	if bodies == nil {
		bodies = reqbody.New(reqbody.Options{MaxBytes: max})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if set != nil {
			r = r.WithContext(withToolset(r.Context(), set))
		}
		if r.Method == http.MethodPost && r.Body != nil {
			// Under the byte budget and read deadline REST bodies share.
			b, err := bodies.Read(w, r, time.Time{})
			if err != nil {
				refuseBody(w, err, bodies)
				return
			}
			defer b.Release() // once the SDK has answered: it holds the bytes until then
			var served bool
			if r, served = s.front(w, r, b.Data, set); served {
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(b.Data))
		}
		ew := &rpcErrorWriter{ResponseWriter: w, redact: s.opts.Dispatcher.RedactText}
		h.ServeHTTP(ew, r)
		ew.finish()
	})
}

// refuseBody answers a body that was not read, with the statuses REST
// gives the same refusals, and closes the connection (the rest of the
// body was not read; see reqbody.Reader.HangUp).
func refuseBody(w http.ResponseWriter, err error, bodies *reqbody.Reader) {
	var be *reqbody.Error
	if !errors.As(err, &be) {
		be = &reqbody.Error{Reason: reqbody.ReasonUnreadable}
	}
	status, msg := http.StatusBadRequest, "reading the request failed"
	switch be.Reason {
	case reqbody.ReasonTooLarge:
		status, msg = http.StatusRequestEntityTooLarge, "the request is larger than the "+strconv.FormatInt(bodies.MaxBytes(), 10)+"-byte limit"
	case reqbody.ReasonBudget:
		w.Header().Set("Retry-After", "1")
		status, msg = http.StatusServiceUnavailable, "toold holds as many request bodies as its memory budget allows; retry in a moment"
	case reqbody.ReasonTimeout:
		status, msg = http.StatusRequestTimeout, "the request did not arrive in time; send it whole, right after the headers"
	}
	w.Header().Set("Content-Type", "application/json")
	if !bodies.HangUp(w, status, ErrorBody(msg)) {
		w.Header().Set("Connection", "close")
		WriteError(w, status, msg)
	}
}

// rpcErrorWriter turns the SDK's plain-text HTTP refusals (a body that is
// not JSON-RPC, an unknown method, a wrong protocol version) into JSON-RPC
// error bodies with the same status, which MCP clients decode and show;
// and redacts the message of every HTTP refusal the SDK writes, in plain
// text or JSON-RPC (a header that does not match the body is quoted).
type rpcErrorWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
	// redact scrubs the SDK's message, which may quote the request (a
	// method's name), as every refusal is (dispatch.Redact).
	redact func(string) string
}

func (w *rpcErrorWriter) WriteHeader(code int) {
	if code >= 400 {
		w.status = code
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *rpcErrorWriter) Write(b []byte) (int, error) {
	if w.status != 0 {
		return w.body.Write(b)
	}
	return w.ResponseWriter.Write(b)
}

// Flush lets the SDK stream events through the wrapper.
func (w *rpcErrorWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok && w.status == 0 {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *rpcErrorWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *rpcErrorWriter) finish() {
	if w.status == 0 {
		return
	}
	if !strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		w.finishJSON()
		return
	}
	msg := strings.TrimSpace(w.body.String())
	code := int64(jsonrpc.CodeInvalidRequest)
	switch {
	case strings.HasPrefix(msg, "malformed payload"):
		code = jsonrpc.CodeParseError
	case strings.Contains(msg, "not handled"):
		code = jsonrpc.CodeMethodNotFound
	}
	w.Header().Del("X-Content-Type-Options")
	writeRPCError(w.ResponseWriter, w.status, code, w.redact(msg))
}

// finishJSON writes a JSON-RPC refusal of the SDK's with its message
// redacted; a body that is not one goes out as it came.
func (w *rpcErrorWriter) finishJSON() {
	body := w.body.Bytes()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // ids stay as sent
	var m map[string]any
	if dec.Decode(&m) == nil {
		if e, ok := m["error"].(map[string]any); ok {
			if msg, ok := e["message"].(string); ok {
				e["message"] = w.redact(msg)
				if b, err := json.Marshal(m); err == nil {
					body = b
				}
			}
		}
	}
	w.Header().Del("Content-Length")
	w.ResponseWriter.WriteHeader(w.status)
	_, _ = w.ResponseWriter.Write(body)
}

// WriteError answers an HTTP request refused before the SDK saw it (no
// key, a foreign origin, draining) with a JSON-RPC error body, which MCP
// clients show their user.
func WriteError(w http.ResponseWriter, status int, msg string) {
	writeRPCError(w, status, jsonrpc.CodeInvalidRequest, msg)
}

// ErrorBody is the JSON-RPC error body WriteError writes.
func ErrorBody(msg string) []byte { return rpcErrorBody(jsonrpc.CodeInvalidRequest, msg) }

func rpcErrorBody(code int64, msg string) []byte {
	body, err := jsonrpc.EncodeMessage(&jsonrpc.Response{Error: &jsonrpc.Error{Code: code, Message: msg}})
	if err != nil { // a message is a string: this cannot fail
		return []byte(`{"jsonrpc":"2.0","error":{"code":-32600,"message":"invalid request"}}`)
	}
	return body
}

func writeRPCError(w http.ResponseWriter, status int, code int64, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(rpcErrorBody(code, msg))
}

type rpcIDKey struct{}

// rpcID is the JSON-RPC id of the HTTP request's tools/call, or "".
func rpcID(ctx context.Context) string {
	id, _ := ctx.Value(rpcIDKey{}).(string)
	return id
}

// message is what the handler reads of a request before the SDK does.
type message struct {
	method    string
	id        string // of a tools/call
	cancelled string // the id a notifications/cancelled names
}

// peek reads a single tools/call's id, or the id a notifications/cancelled
// names; anything else (another method, a batch, a body that is not JSON)
// is left to the SDK alone. A stateless server's SDK cannot route a
// cancellation to a call made in another request (it would even close the
// notification's temporary session before reading it), so toold does.
//
// Every body is decoded: a method name may be written with escapes
// ("tools\/call"), so no byte search can tell which bodies to skip, and
// the large bodies are tool calls, which are decoded anyway.
func peek(body []byte) message {
	m, ok := decodeOne(body)
	if !ok {
		return message{}
	}
	return peekMessage(m)
}

// decodeOne decodes a body that is one message (not a batch), its member
// names as written, as the SDK reads them (encoding/json's struct fields
// would match "Method" too).
func decodeOne(body []byte) (wireMessage, bool) {
	var raw map[string]json.RawMessage
	if json.Unmarshal(body, &raw) != nil {
		return wireMessage{}, false
	}
	m := wireMessage{ID: raw["id"], Params: raw["params"], Result: raw["result"], Error: raw["error"], raw: body}
	if json.Unmarshal(raw["method"], &m.Method) != nil && raw["method"] != nil {
		return wireMessage{}, false
	}
	_ = json.Unmarshal(raw["jsonrpc"], &m.JSONRPC)
	return m, true
}

func peekMessage(m wireMessage) message {
	switch m.Method {
	case "tools/call":
		if len(m.ID) > 0 {
			return message{method: m.Method, id: rawID(m.ID)}
		}
	case "notifications/cancelled":
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(m.Params, &p) == nil && len(p.RequestID) > 0 {
			return message{method: m.Method, cancelled: rawID(p.RequestID)}
		}
	}
	return message{}
}

func rawID(raw json.RawMessage) string {
	var id any
	if json.Unmarshal(raw, &id) != nil {
		return ""
	}
	return idString(id)
}

// idString renders a JSON-RPC id so that 7 and "7" stay apart.
func idString(id any) string {
	switch v := id.(type) {
	case string:
		return "s:" + v
	case float64:
		return "n:" + strconv.FormatFloat(v, 'f', -1, 64)
	}
	return ""
}

// inflight are the calls that a notifications/cancelled may name.
type inflight struct {
	mu    sync.Mutex
	calls map[callKey][]*tracked
}

type callKey struct{ caller, id string }

type tracked struct{ cancel context.CancelCauseFunc }

func newInflight() *inflight { return &inflight{calls: map[callKey][]*tracked{}} }

// track registers a call under its caller and id (an id "" is never named
// by a cancellation, but is still cancelled by cancelAll); done forgets it.
func (f *inflight) track(ctx context.Context, caller, id string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	k, t := callKey{caller, id}, &tracked{cancel}
	f.mu.Lock()
	f.calls[k] = append(f.calls[k], t)
	f.mu.Unlock()
	return ctx, func() {
		f.mu.Lock()
		list := f.calls[k]
		for i, x := range list {
			if x == t {
				list = append(list[:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(f.calls, k)
		} else {
			f.calls[k] = list
		}
		f.mu.Unlock()
		cancel(nil)
	}
}

// cancelAll cancels every call in flight with cause.
func (f *inflight) cancelAll(cause error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, list := range f.calls {
		for _, t := range list {
			t.cancel(cause)
		}
	}
}

// cancel cancels the caller's call with that id. Two clients of one key
// may use the same ids; when the id names more than one call, none is
// cancelled: cancelling the wrong call is worse than letting one finish.
func (f *inflight) cancel(caller, id string) {
	if id == "" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if list := f.calls[callKey{caller, id}]; len(list) == 1 {
		list[0].cancel(context.Canceled)
	}
}
