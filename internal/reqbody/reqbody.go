// Package reqbody reads request bodies into memory under three bounds: a
// cap per body, a budget of bytes shared by every body held at once, and a
// read deadline per body. Without the budget, memory grows with
// max_connections × max_body_bytes however the calls are limited; without
// the deadline, a client that sends its headers and then trickles (or
// stops) holds what it sent, and whatever the request was admitted to, for
// as long as it likes.
//
// A body's bytes are reserved before they are read: all at once when the
// request says its length (a body that could never fit is refused without
// reading a byte), or as the buffer grows when it is chunked. The
// reservation is held until the caller releases the body, when the handler
// is done with it: the budget bounds the bytes held, not only those in
// transit.
package reqbody

import (
	"errors"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Defaults of Options.
const (
	DefaultMaxBytes = 1 << 20
	// DefaultBudgetBodies is the default budget in bodies of the largest
	// size: with 1 MiB bodies, 4 MiB. Measured in the load harness
	// (bench/load -only uploads), 1,000 stalled 1 MiB uploads then grow
	// toold's RSS by about 12 MiB; twice the budget, by about 18 MiB.
	DefaultBudgetBodies = 4
	DefaultTimeout      = 10 * time.Second
)

// Reasons a body is refused, as Error.Reason and the refusals metric say.
const (
	ReasonTooLarge   = "too_large"
	ReasonBudget     = "budget"
	ReasonTimeout    = "timeout"
	ReasonUnreadable = "unreadable"
)

// Options configure a Reader.
type Options struct {
	// MaxBytes caps one body (default DefaultMaxBytes).
	MaxBytes int64
	// Budget caps the bytes of every body held at once (default
	// DefaultBudgetBodies × MaxBytes, and never below MaxBytes: a body of
	// the largest size allowed must be able to fit).
	Budget int64
	// Timeout bounds how long a body may take to arrive, counted from when
	// the reading starts (default DefaultTimeout).
	Timeout time.Duration
	// Registerer receives the metrics; nil registers nothing.
	Registerer prometheus.Registerer
}

// Reader reads bodies; one is shared by every route (REST and MCP), so
// the budget is one. Safe for concurrent use.
type Reader struct {
	max, budget int64
	timeout     time.Duration
	reaper      reaper
	held        atomic.Int64
	heldGauge   prometheus.Gauge
	refused     *prometheus.CounterVec
}

// New builds a reader and registers its metrics.
func New(o Options) *Reader {
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.Budget <= 0 {
		o.Budget = DefaultBudgetBodies * o.MaxBytes
	}
	o.Budget = max(o.Budget, o.MaxBytes)
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	f := promauto.With(o.Registerer)
	rd := &Reader{max: o.MaxBytes, budget: o.Budget, timeout: o.Timeout, reaper: reaper{delay: lingerDelay},
		heldGauge: f.NewGauge(prometheus.GaugeOpts{Name: "toold_body_bytes_held",
			Help: "Bytes of request bodies held in memory now, against toold_body_budget_bytes."}),
		refused: f.NewCounterVec(prometheus.CounterOpts{Name: "toold_body_refusals_total",
			Help: "Request bodies refused, by reason: too_large, budget (the shared budget was spent), timeout (did not arrive in time), unreadable."},
			[]string{"reason"}),
	}
	f.NewGauge(prometheus.GaugeOpts{Name: "toold_body_budget_bytes",
		Help: "Bytes of request bodies toold holds in memory at most, over all requests."}).Set(float64(o.Budget))
	for _, r := range []string{ReasonTooLarge, ReasonBudget, ReasonTimeout, ReasonUnreadable} {
		rd.refused.WithLabelValues(r)
	}
	return rd
}

// MaxBytes is the cap of one body.
func (rd *Reader) MaxBytes() int64 { return rd.max }

// Timeout is how long a body may take to arrive.
func (rd *Reader) Timeout() time.Duration { return rd.timeout }

// Error is a body that was not read. Reason is one of the Reason
// constants.
type Error struct {
	Reason string
	// Max is the cap of one body, for a message saying so.
	Max int64
	Err error
}

func (e *Error) Error() string {
	msg := "request body refused: " + e.Reason
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Body is a body read under the budget. Release gives its bytes back to
// the budget; Data must not be used after.
type Body struct {
	Data []byte
	rd   *Reader
	held int64
	once sync.Once
}

// Release returns the body's reservation; safe to call more than once and
// on a nil Body.
func (b *Body) Release() {
	if b == nil {
		return
	}
	b.once.Do(func() { b.rd.release(b.held) })
}

func (rd *Reader) reserve(n int64) bool {
	if rd.held.Add(n) > rd.budget {
		rd.held.Add(-n)
		return false
	}
	rd.heldGauge.Add(float64(n))
	return true
}

func (rd *Reader) release(n int64) {
	if n > 0 {
		rd.held.Add(-n)
		rd.heldGauge.Sub(float64(n))
	}
}

// Read reads r's body. It must arrive within the reader's timeout from
// now, and by deadline when that is earlier (the deadline of the call it
// carries: a body arriving after the call's time is up is of no use). On
// an error the connection cannot serve another request (the body was not
// read to its end), so the response should close it; the caller writes
// the refusal.
func (rd *Reader) Read(w http.ResponseWriter, r *http.Request, deadline time.Time) (*Body, error) {
	if r.ContentLength > rd.max {
		return nil, rd.refuse(ReasonTooLarge, nil)
	}
	b := &Body{rd: rd}
	if r.ContentLength > 0 {
		if !rd.reserve(r.ContentLength) {
			return nil, rd.refuse(ReasonBudget, nil)
		}
		b.held = r.ContentLength
	}
	until := time.Now().Add(rd.timeout)
	if !deadline.IsZero() && deadline.Before(until) {
		until = deadline
	}
	// Not supported (HTTP/2 before Go 1.20, a test's recorder): the
	// server's own ReadTimeout still bounds the request.
	_ = http.NewResponseController(w).SetReadDeadline(until)
	data, err := rd.fill(b, r.Body, r.ContentLength)
	if err != nil {
		b.Release()
		return nil, err
	}
	b.Data = data
	return b, nil
}

// chunk is the first buffer of a body (of an announced one, at most), and
// the smallest step a chunked body's reservation grows by.
const chunk = 16 << 10

// fill reads body into a buffer that grows as bytes arrive: a stalled
// client that sent a few bytes holds a small buffer, not what it
// announced. A body of unknown length (n < 0) reserves each growth before
// making it.
func (rd *Reader) fill(b *Body, body io.Reader, n int64) ([]byte, error) {
	if n == 0 {
		return nil, nil
	}
	limit := n // the buffer never exceeds the announced length...
	if n < 0 {
		limit = rd.max + 1 // ...or one byte past the cap, to see a body too large
	}
	var buf []byte
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) == limit { // only an announced length gets here
				return buf, expectEOF(rd, body)
			}
			next := min(max(2*int64(cap(buf)), chunk), limit)
			if n > 0 && cap(buf) > 0 {
				// An announced body that keeps arriving gets its whole
				// (reserved) length at once: doubling would leave as much
				// garbage again as the body, outside the budget.
				next = n
			}
			if n < 0 && !rd.grow(b, next) {
				return nil, rd.refuse(ReasonBudget, nil)
			}
			buf = append(make([]byte, 0, next), buf...)
		}
		m, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if int64(len(buf)) > rd.max {
			return nil, rd.refuse(ReasonTooLarge, nil)
		}
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return nil, rd.readError(err)
		}
	}
}

// grow raises a chunked body's reservation to size.
func (rd *Reader) grow(b *Body, size int64) bool {
	if !rd.reserve(size - b.held) {
		return false
	}
	b.held = size
	return true
}

// expectEOF reads past a body of announced length, which net/http ends
// there; anything else is a read error.
func expectEOF(rd *Reader, body io.Reader) error {
	var one [1]byte
	if _, err := body.Read(one[:]); err != nil && !errors.Is(err, io.EOF) {
		return rd.readError(err)
	}
	return nil
}

func (rd *Reader) readError(err error) error {
	var tooBig *http.MaxBytesError
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return rd.refuse(ReasonTimeout, err)
	case errors.As(err, &tooBig):
		return rd.refuse(ReasonTooLarge, err)
	}
	return rd.refuse(ReasonUnreadable, err)
}

func (rd *Reader) refuse(reason string, err error) *Error {
	rd.refused.WithLabelValues(reason).Inc()
	return &Error{Reason: reason, Max: rd.max, Err: err}
}
