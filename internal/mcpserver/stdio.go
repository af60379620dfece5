package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toold/toold/internal/auth"
)

// DefaultStdioDrain bounds how long toold -stdio, its input closed, goes on
// answering the requests it already read.
const DefaultStdioDrain = 30 * time.Second

// ServeStdio serves MCP on in and out (newline-delimited JSON-RPC) until
// the client closes in or ctx ends. Nothing else may write to out. The
// caller is Options.StdioPrincipal. A line that is not a JSON-RPC message
// is answered with a JSON-RPC error, and the session goes on; the methods
// toold serves in front of the SDK (tasks, answers to its own questions)
// are taken out of the stream before the SDK reads it (see stdioSession).
// When in ends, every request already read is answered before ServeStdio
// returns (within Options.StdioDrain): `printf ... | toold -stdio` gets
// every answer.
func (s *Server) ServeStdio(ctx context.Context, in io.ReadCloser, out io.WriteCloser) error {
	limit := int(max(s.opts.MaxBodyBytes, DefaultMaxBodyBytes))
	// The session's own work (a task's watcher, a waiting tasks/result)
	// ends with the session.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ss := newStdioSession(s, out)
	ctx = auth.NewContext(ctx, s.stdioPrincipal())
	ctx = withPeer(ctx, ss.peer())
	filtered := ss.filter(ctx, in, limit)
	defer filtered.Close()
	err := s.sdk.Run(ctx, &mcp.IOTransport{Reader: filtered, Writer: struct {
		io.Writer
		io.Closer
	}{ss.out, out}, MaxLineLength: limit + 1})
	// The host ending the session closes its ends of the pipes: stdin's
	// EOF, or (racing it) a write or read on a pipe it closed.
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// stdioPrincipal is the caller at the other end of stdio: the key the
// operator named (-stdio-key), or the local user who started toold, as an
// anonymous caller on loopback is, where no keys are configured.
func (s *Server) stdioPrincipal() *auth.Principal {
	if s.opts.StdioPrincipal != nil {
		return s.opts.StdioPrincipal
	}
	return auth.Anonymous
}

// stdioSession is one stdio connection: the filter in front of the SDK,
// the writer every message to the client passes, and what toold keeps of
// the session itself — the client's capabilities (read from its initialize)
// and the requests not yet answered.
type stdioSession struct {
	s       *Server
	out     *trackingWriter
	mu      sync.Mutex // guards caps
	caps    clientCaps
	pending *pendingIDs
}

func newStdioSession(s *Server, out io.Writer) *stdioSession {
	p := newPendingIDs()
	return &stdioSession{s: s, out: &trackingWriter{w: out, pending: p}, pending: p}
}

// peer is the client as toold asks it things and tells it of its tasks.
func (ss *stdioSession) peer() *peer {
	return &peer{stdio: true, send: ss.send, caps: func() clientCaps {
		ss.mu.Lock()
		defer ss.mu.Unlock()
		return ss.caps
	}}
}

// send writes one message to the client, as a line.
func (ss *stdioSession) send(msg []byte) error {
	_, err := ss.out.Write(append(bytes.TrimRight(msg, "\n"), '\n'))
	return err
}

// filter passes on the lines of in that are JSON-RPC messages for the SDK
// and answers any other line itself, as JSON-RPC asks: -32700 (parse
// error) for a line that is not JSON or is longer than max, -32600
// (invalid request) for JSON that is no message, with the id when it can
// be read. Given such a line the SDK ends the session, and a host (or a
// person typing into toold -stdio) would get no answer at all. Blank lines
// are skipped. The returned reader ends when in does, once every request
// read is answered; closing it stops the filter at its next line.
func (ss *stdioSession) filter(ctx context.Context, in io.Reader, max int) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		r := bufio.NewReaderSize(in, 64<<10)
		for {
			line, long, err := readLine(r, max)
			var werr error
			switch {
			case long:
				werr = answer(ss.out, nil, jsonrpc.CodeParseError, "Parse error: the line is longer than "+strconv.Itoa(max)+" bytes")
			case len(bytes.TrimSpace(line)) == 0:
			case !json.Valid(line):
				werr = answer(ss.out, nil, jsonrpc.CodeParseError, "Parse error: the line is not JSON; send one JSON-RPC message per line")
			case !isMessage(line):
				werr = answer(ss.out, lineID(line), jsonrpc.CodeInvalidRequest, "Invalid Request: the line is JSON but not a JSON-RPC 2.0 message")
			case ss.serveOwn(ctx, line):
			default:
				ss.pending.add(requestIDs(line)...)
				_, werr = pw.Write(append(bytes.TrimRight(line, "\r\n"), '\n'))
			}
			if werr != nil {
				pw.CloseWithError(werr)
				return
			}
			if err != nil {
				// The end of stdin ends the session (io.EOF) once what it
				// asked is answered.
				ss.pending.drain(ctx, cmpDuration(ss.s.opts.StdioDrain, DefaultStdioDrain))
				pw.CloseWithError(err)
				return
			}
		}
	}()
	return pr
}

func cmpDuration(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// readLine reads one line (its newline included) of at most max bytes;
// a longer one is read to its end and dropped, and long is true.
func readLine(r *bufio.Reader, max int) (line []byte, long bool, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		if !long {
			if len(line)+len(chunk) > max {
				long, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, long, err
		}
	}
}

// isMessage reports whether the SDK can decode line: one message, or a
// non-empty array of them.
func isMessage(line []byte) bool {
	var batch []json.RawMessage
	if json.Unmarshal(line, &batch) == nil {
		for _, m := range batch {
			if _, err := jsonrpc.DecodeMessage(m); err != nil {
				return false
			}
		}
		return len(batch) > 0
	}
	_, err := jsonrpc.DecodeMessage(line)
	return err == nil
}

// lineID is the id of a line that is an object with a string or number
// id, else nil (JSON-RPC answers null then).
func lineID(line []byte) json.RawMessage {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(line, &m) != nil || len(m.ID) == 0 || (m.ID[0] != '"' && m.ID[0] != '-' && (m.ID[0] < '0' || m.ID[0] > '9')) {
		return nil
	}
	return m.ID
}

func answer(out io.Writer, id json.RawMessage, code int64, msg string) error {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   jsonrpc.Error   `json:"error"`
	}{"2.0", id, jsonrpc.Error{Code: code, Message: msg}})
	if err != nil {
		return err
	}
	_, err = out.Write(append(b, '\n'))
	return err
}

// wireMessage is what the stdio session reads of a message: whether it is
// a request (with an id), a notification or a response, and to what.
type wireMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
	// raw is the message as it came (decodeOne's), for what toold
	// answers itself and reads strictly (a task-augmented call).
	raw []byte
	// call is a task-augmented tools/call read from raw, once, strictly
	// (ownRequest), or why it could not be.
	call    *taskCall
	callErr error
}

// messages decodes a line: one message or a batch of them.
func messages(line []byte) []wireMessage {
	line = bytes.TrimSpace(line)
	if len(line) > 0 && line[0] == '[' {
		var batch []wireMessage
		_ = json.Unmarshal(line, &batch)
		return batch
	}
	var m wireMessage
	if json.Unmarshal(line, &m) != nil {
		return nil
	}
	return []wireMessage{m}
}

// requestIDs are the ids of the requests a line holds.
func requestIDs(line []byte) []string {
	var ids []string
	for _, m := range messages(line) {
		if m.Method != "" && len(m.ID) > 0 && string(m.ID) != "null" {
			ids = append(ids, rawID(m.ID))
		}
	}
	return ids
}

// responseIDs are the ids of the responses a line holds.
func responseIDs(line []byte) []string {
	var ids []string
	for _, m := range messages(line) {
		if m.Method == "" && len(m.ID) > 0 && (m.Result != nil || m.Error != nil) {
			ids = append(ids, rawID(m.ID))
		}
	}
	return ids
}

// trackingWriter serializes whole writes — the SDK writes each message
// with one Write, and so does toold; lines never interleave — and marks
// the requests each response answers.
type trackingWriter struct {
	mu      sync.Mutex
	w       io.Writer
	pending *pendingIDs
}

func (t *trackingWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	n, err := t.w.Write(p)
	t.mu.Unlock()
	if err == nil {
		t.pending.done(responseIDs(p)...)
	}
	return n, err
}

// pendingIDs are the requests read and not yet answered.
type pendingIDs struct {
	mu      sync.Mutex
	ids     map[string]int
	changed chan struct{}
}

func newPendingIDs() *pendingIDs {
	return &pendingIDs{ids: map[string]int{}, changed: make(chan struct{}, 1)}
}

func (p *pendingIDs) add(ids ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range ids {
		p.ids[id]++
	}
}

func (p *pendingIDs) done(ids ...string) {
	if len(ids) == 0 {
		return
	}
	p.mu.Lock()
	for _, id := range ids {
		if p.ids[id] <= 1 {
			delete(p.ids, id)
		} else {
			p.ids[id]--
		}
	}
	p.mu.Unlock()
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

func (p *pendingIDs) empty() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ids) == 0
}

// drain returns once every request is answered, ctx ends or d passes.
func (p *pendingIDs) drain(ctx context.Context, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for !p.empty() {
		select {
		case <-p.changed:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// serveOwn takes out of the stream the SDK reads the lines toold answers
// itself — a client's answer to one of toold's requests, the tasks
// methods and task-augmented calls — and notes what a client's initialize
// declared (the SDK keeps no tasks capability). It reports whether it took
// the line. A request it takes is answered on its own goroutine, as the
// SDK answers its own: tasks/result may wait long.
func (ss *stdioSession) serveOwn(ctx context.Context, line []byte) bool {
	m, ok := decodeOne(line) // a batch is the SDK's
	if !ok {
		return false
	}
	if m.Method == "initialize" {
		ss.mu.Lock()
		ss.caps = capsOf(m.Params)
		ss.mu.Unlock()
		return false
	}
	if id, ans, ok := ownAnswer(m); ok {
		if who, err := caller(ctx); err == nil {
			go ss.s.answered(ctx, who.Name, id, ans)
		}
		return true
	}
	if !ss.s.ownRequest(&m) {
		return false
	}
	ss.pending.add(rawID(m.ID))
	p := ss.peer()
	p.answered = make(chan struct{})
	go func() {
		defer close(p.answered)
		_ = ss.send(ss.s.serveOwnRequest(ctx, p, m))
	}()
	return true
}
