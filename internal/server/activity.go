package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/events"
	"github.com/toold/toold/internal/executions"
	"github.com/toold/toold/internal/tools"
)

// keepAlive is how often an idle stream sends a comment, so proxies and
// clients see it is alive.
const keepAlive = 15 * time.Second

// sse writes server-sent events with ids (resumable with Last-Event-ID).
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
	mu sync.Mutex
}

func openSSE(w http.ResponseWriter) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &sse{w: w, rc: http.NewResponseController(w)}
	_ = s.rc.Flush()
	return s
}

// event writes one event; JSON holds no raw newline, so one data line
// carries it.
func (s *sse) event(id, name string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	buf := make([]byte, 0, len(data)+len(id)+len(name)+24)
	if id != "" {
		buf = append(append(append(buf, "id: "...), id...), '\n')
	}
	buf = append(append(append(buf, "event: "...), name...), '\n')
	buf = append(append(append(buf, "data: "...), data...), "\n\n"...)
	if _, err := s.w.Write(buf); err != nil {
		return err
	}
	return s.rc.Flush()
}

func (s *sse) comment(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.w.Write([]byte(": " + text + "\n\n")); err == nil {
		_ = s.rc.Flush()
	}
}

// keepAlive comments every keepAlive until the returned stop is called;
// stop waits for it, so nothing writes after the handler returned.
func (s *sse) keepAlive() (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(keepAlive)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				s.comment("keep-alive")
			}
		}
	}()
	return func() { close(quit); <-done }
}

// lastEventID reads Last-Event-ID (or ?last_event_id=, for clients that
// cannot set headers).
func lastEventID(r *http.Request) (events.ID, *tools.Error) {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("last_event_id")
	}
	id, err := events.ParseID(strings.TrimSpace(v))
	if err != nil {
		return id, badHeader("Last-Event-ID", "is not an event id: "+err.Error(), "send the id: of the last event you received, or nothing to start now")
	}
	return id, nil
}

// storeRequired refuses when there is no store to stream from.
func (s *Server) storeRequired(w http.ResponseWriter, r *http.Request) bool {
	if s.opts.Store == nil {
		s.refuse(w, r, "", dispatch.StatusRejected, tools.Errorf(tools.OverloadError, "the state store is off (state.enabled: false): there is no activity stream or audit log").
			WithCode(tools.CodeStoreUnavailable).WithSuggestion("ask the operator to turn the store on"))
		return false
	}
	return true
}

// streamFrom checks what a stream needs (a store, a well-formed
// Last-Event-ID) and returns where to resume.
func (s *Server) streamFrom(w http.ResponseWriter, r *http.Request) (events.ID, bool) {
	if !s.storeRequired(w, r) {
		return events.ID{}, false
	}
	after, terr := lastEventID(r)
	if terr != nil {
		s.refuse(w, r, "", dispatch.StatusRejected, terr)
		return after, false
	}
	return after, true
}

// maxSince bounds GET /events?since=: what the console shows on opening,
// not a bulk export (the audit log is that).
const maxSince = 24 * time.Hour

// activity is GET /events: every replica's call events, filtered by
// ?tool=, ?caller= and ?status= (a status or an event type), from now,
// from ?since= ago (the calls made before a page opened), or after
// Last-Event-ID.
func (s *Server) activity(w http.ResponseWriter, r *http.Request) {
	p, ok := s.caller(w, r)
	if !ok {
		return
	}
	after, ok := s.streamFrom(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	f := events.Filter{Tool: q.Get("tool"), Caller: q.Get("caller"), Status: q.Get("status")}
	pos := events.Position{After: after}
	if v := q.Get("since"); v != "" && after.IsZero() {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > maxSince {
			s.refuse(w, r, "", dispatch.StatusRejected, badParam("since", fmt.Sprintf("%q is not a duration from 1s to 24h", v),
				"send since=15m for the last quarter of an hour's calls, or leave it out for calls from now on"))
			return
		}
		pos.Since = time.Now().Add(-d)
	}
	ctx, cancel := s.sseContext(r)
	defer cancel()
	stream := openSSE(w)
	defer stream.keepAlive()()
	observes := s.opts.Dispatcher.Observes(p.Who(), via(r)) // the policy's observe
	err := events.Activity(ctx, s.opts.Store, pos, f, func(ev events.Event) bool {
		if ev.Tool != "" && !observes(ev.Tool) {
			return true
		}
		data, _ := json.Marshal(ev)
		return stream.event(ev.ID, ev.Type, data) == nil
	})
	if err != nil && ctx.Err() == nil {
		stream.comment("the store failed; reconnect with Last-Event-ID to resume")
	}
}

// executionEvents is GET /executions/{id}/events: the execution's events
// from its acceptance (or after Last-Event-ID) to its end.
func (s *Server) executionEvents(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathID(w, r, noExecution)
	if !ok {
		return
	}
	after, ok := s.streamFrom(w, r)
	if !ok {
		return
	}
	p, ok := s.caller(w, r)
	if !ok {
		return
	}
	rec, err := s.opts.Executions.Get(r.Context(), p.Name, id)
	if err != nil {
		s.send(w, r, s.errorReply(r, "", err))
		return
	}
	info(r).tool = rec.Tool
	ctx, cancel := s.sseContext(r)
	defer cancel()
	stream := openSSE(w)
	defer stream.keepAlive()()
	if after.IsZero() {
		// The execution's stream starts with its acceptance, told from
		// its record (no id: a client resuming gets it again).
		tell(stream, events.Event{Type: events.TypePending, Time: rec.CreatedAt, Status: string(dispatch.StatusPending)}, rec)
	}
	if rec.Quiet && rec.Status.Final() {
		// It ended before its id was given out: none of its own events
		// were published, and its record tells its start and end.
		tell(stream, events.Event{Type: events.TypeStart, Time: rec.StartedAt, Replica: rec.Replica}, rec)
		tellEnd(stream, rec)
		return
	}
	s.follow(ctx, r, stream, rec.Caller, id, events.Position{After: after, FromStart: true}, cancel)
}

// eventWriter is a stream an execution's events are written to.
type eventWriter interface {
	event(id, name string, data []byte) error
	comment(text string)
}

// follow writes an execution's events to a stream until it ends (its end or
// error event), the client leaves or toold drains. A final record whose
// events the stream no longer holds (they are kept for less time than
// records) still gets its end, from the record.
func (s *Server) follow(ctx context.Context, r *http.Request, w eventWriter, caller, id string,
	from events.Position, cancel context.CancelFunc) {
	ended := false
	go func() {
		rec, err := s.opts.Executions.WaitFinal(ctx, caller, id, 24*time.Hour)
		if err != nil || !rec.Status.Final() {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
			cancel()
		}
	}()
	err := events.Execution(ctx, s.opts.Store, id, from, func(ev events.Event) bool {
		if w.event(ev.ID, ev.Type, executionEventData(&ev)) != nil {
			return false
		}
		ended = ev.Type == events.TypeEnd || ev.Type == events.TypeError
		return !ended
	})
	if ended || r.Context().Err() != nil {
		return
	}
	if final, gerr := s.opts.Executions.Get(context.WithoutCancel(r.Context()), caller, id); gerr == nil && final.Status.Final() {
		tellEnd(w, final)
	} else if err != nil && !errors.Is(err, context.Canceled) {
		w.comment("the store failed; reconnect to GET /executions/" + id + "/events with Last-Event-ID to resume")
	}
}

// tell writes ev, an event of rec told from rec (no id: the stream does
// not hold it), naming rec's call.
func tell(w eventWriter, ev events.Event, rec *executions.Record) {
	ev.RequestID, ev.Tool, ev.Caller, ev.ExecutionID = rec.RequestID, rec.Tool, rec.Caller, rec.ID
	data, _ := json.Marshal(ev)
	_ = w.event("", ev.Type, data)
}

// tellEnd writes a final record's end event, told from the record (no
// id: the stream does not hold it).
func tellEnd(w eventWriter, final *executions.Record) {
	env := final.View()
	name := events.TypeEnd
	if !env.Success {
		name = events.TypeError
	}
	_ = w.event("", name, env.AppendJSON(nil))
}

func executionEventData(ev *events.Event) []byte {
	switch ev.Type {
	case events.TypeEnd, events.TypeError, events.TypeWaiting:
		if len(ev.Envelope) > 0 {
			return ev.Envelope
		}
	case events.TypeOutput:
		data, _ := json.Marshal(tools.Chunk{Stream: ev.Stream, Data: ev.Chunk})
		return data
	}
	ev.Envelope = nil
	data, _ := json.Marshal(ev)
	return data
}

// auditPage is GET /audit's answer.
type auditPage struct {
	Records []json.RawMessage `json:"records"`
	// Next is the cursor of the following page (?after=); empty at the
	// end of the log.
	Next string `json:"next,omitempty"`
}

// audit is GET /audit[?after=&limit=]: the audit log, byte for byte as
// sealed, to admin keys. Reading it is itself audited.
func (s *Server) audit(w http.ResponseWriter, r *http.Request) {
	if !s.storeRequired(w, r) {
		return
	}
	q := r.URL.Query()
	limit, terr := parseLimit(q.Get("limit"))
	after, err := events.ParseID(q.Get("after"))
	if terr == nil && err != nil {
		terr = badParam("after", "is not a cursor of this listing", "pass the next value of the previous page, or leave it out")
	}
	if terr != nil {
		s.refuse(w, r, "", dispatch.StatusRejected, terr)
		return
	}
	page := auditPage{Records: []json.RawMessage{}}
	var last events.ID
	more := false
	rerr := events.ReadAudit(r.Context(), s.opts.Store, after, func(id events.ID, line []byte) bool {
		if len(page.Records) == limit {
			more = true
			return false
		}
		page.Records = append(page.Records, append(json.RawMessage{}, line...))
		last = id
		return true
	})
	if rerr != nil {
		s.send(w, r, s.errorReply(r, "", executions.StoreError(rerr)))
		return
	}
	if more {
		page.Next = last.String()
	}
	s.auditAction(r, "read_audit", after.String())
	writeJSON(w, http.StatusOK, page) // records byte for byte as sealed: see writeJSON
}
