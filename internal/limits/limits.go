// Package limits makes every tool a bulkhead: at most N executions in
// flight, at most M more waiting in a FIFO queue, the rest refused at once
// with an estimate of when to retry. One slow or flooded tool cannot take the
// capacity of another.
package limits

import (
	"cmp"
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/tools"
)

// Rejection reasons, as the rejections metric labels them.
const (
	ReasonQueueFull    = string(tools.CodeQueueFull)
	ReasonQueueTimeout = string(tools.CodeQueueTimeout)
	ReasonGlobalCap    = string(tools.CodeGlobalCapacity)
	ReasonServerCap    = string(tools.CodeServerCapacity)
	ReasonCancelled    = "cancelled"
	ReasonDeadline     = "deadline"
)

// Options configure the limiter.
type Options struct {
	// GlobalCap, when positive, bounds the calls accepted (running plus
	// queued) over all tools together; beyond it calls are refused at once.
	GlobalCap int
	// ServerCaps bound, by source name (Spec.Source: the upstream MCP
	// server a tool is served from), the calls running on that source's
	// tools together, on top of each tool's own bulkhead. A call given its
	// tool's slot while its server has that many running is refused at
	// once. Tools of a source not named here are not capped together.
	ServerCaps map[string]int
	// Registerer receives the limiter's metrics; nil registers nothing.
	Registerer prometheus.Registerer
}

// Limiter holds one bulkhead per tool; safe for concurrent use.
type Limiter struct {
	mu     sync.Mutex
	bulk   map[string]*bulkhead
	global atomic.Int64
	cap    int64
	// servers are replaced whole by SetServerCaps (a reload); a call
	// keeps the cap it entered.
	servers  atomic.Pointer[map[string]*serverCap]
	inFlight *prometheus.GaugeVec
	queued   *prometheus.GaugeVec
	capacity *prometheus.GaugeVec
	rejected *prometheus.CounterVec
}

// New builds a limiter. Bulkheads are made on first use from each tool's
// resolved limits, so a registry can be built before the limiter.
func New(opts Options) *Limiter {
	f := promauto.With(opts.Registerer)
	l := &Limiter{
		bulk: map[string]*bulkhead{},
		cap:  int64(opts.GlobalCap),
		inFlight: f.NewGaugeVec(prometheus.GaugeOpts{Name: "toold_tool_in_flight",
			Help: "Executions of the tool running now."}, []string{"tool"}),
		queued: f.NewGaugeVec(prometheus.GaugeOpts{Name: "toold_tool_queue_depth",
			Help: "Calls of the tool waiting for a slot."}, []string{"tool"}),
		capacity: f.NewGaugeVec(prometheus.GaugeOpts{Name: "toold_tool_capacity",
			Help: "Configured capacity of the tool's bulkhead, by kind (in_flight or queue)."}, []string{"tool", "kind"}),
		rejected: f.NewCounterVec(prometheus.CounterOpts{Name: "toold_tool_rejections_total",
			Help: "Calls refused or abandoned before running, by reason."}, []string{"tool", "reason"}),
	}
	l.SetServerCaps(opts.ServerCaps)
	return l
}

// Register creates the bulkheads of every tool now, so their capacity is
// exported before the first call. A tool whose resolved limits changed (a
// reload) has its bulkhead resized in place: no running or queued call is
// dropped (see bulkhead.resize).
func (l *Limiter) Register(entries ...*registry.Entry) {
	for _, e := range entries {
		b := l.bulkhead(e)
		if lim := e.Spec.Limits; b.lim() != lim {
			b.resize(lim)
			l.capacity.WithLabelValues(e.Spec.Name, "in_flight").Set(float64(lim.MaxInFlight))
			l.capacity.WithLabelValues(e.Spec.Name, "queue").Set(float64(lim.Queue()))
		}
	}
}

func (l *Limiter) bulkhead(e *registry.Entry) *bulkhead {
	l.mu.Lock()
	defer l.mu.Unlock()
	name := e.Spec.Name
	b, ok := l.bulk[name]
	if !ok {
		lim := e.Spec.Limits
		b = &bulkhead{limits: lim, waiters: list.New(),
			inFlight: l.inFlight.WithLabelValues(name), queued: l.queued.WithLabelValues(name)}
		b.rejected = func(reason string) { l.rejected.WithLabelValues(name, reason).Inc() }
		l.capacity.WithLabelValues(name, "in_flight").Set(float64(lim.MaxInFlight))
		l.capacity.WithLabelValues(name, "queue").Set(float64(lim.Queue()))
		for _, r := range []string{ReasonQueueFull, ReasonQueueTimeout, ReasonGlobalCap, ReasonCancelled, ReasonDeadline} {
			l.rejected.WithLabelValues(name, r)
		}
		if (*l.servers.Load())[e.Spec.Source] != nil {
			l.rejected.WithLabelValues(name, ReasonServerCap)
		}
		l.bulk[name] = b
	}
	return b
}

// Admit waits for a slot of the tool's bulkhead, and then takes one of its
// server's (Options.ServerCaps). It returns the function that frees the
// slots, to be called exactly once when the execution really ends; or a
// *tools.Error (overload_error) when the call is refused; or the context's
// error when the caller left or its deadline passed while queued.
func (l *Limiter) Admit(ctx context.Context, e *registry.Entry) (func(), error) {
	return l.admit(ctx, e, true)
}

// errWouldWait is admit's answer, without wait, when no slot is free.
var errWouldWait = errors.New("limits: no slot is free now")

// TryAdmit is Admit for a slot free now: it never waits. With no slot
// free, ok is false and err nil (the call would queue: use Admit); a
// refusal Admit would give at once (a cap) is err.
func (l *Limiter) TryAdmit(e *registry.Entry) (release func(), ok bool, err error) {
	release, err = l.admit(context.Background(), e, false)
	if errors.Is(err, errWouldWait) {
		return nil, false, nil
	}
	return release, err == nil, err
}

// admit is Admit, or TryAdmit without wait.
func (l *Limiter) admit(ctx context.Context, e *registry.Entry, wait bool) (func(), error) {
	b := l.bulkhead(e)
	if l.cap > 0 {
		if l.global.Add(1) > l.cap {
			l.global.Add(-1)
			b.rejected(ReasonGlobalCap)
			return nil, overload(tools.CodeGlobalCapacity, "toold is at its global capacity", b.retryAfter(b.lim().Queue()+1))
		}
	}
	release, err := b.admit(ctx, wait)
	if err == nil {
		release, err = (*l.servers.Load())[e.Spec.Source].enter(b, release)
	}
	if err != nil {
		if l.cap > 0 {
			l.global.Add(-1)
		}
		return nil, err
	}
	if l.cap > 0 {
		return func() { release(); l.global.Add(-1) }, nil
	}
	return release, nil
}

// Full returns the refusal Admit would give right now if the tool's
// bulkhead (or the global cap) has no room, else nil. The pipeline asks
// before it reads the arguments: under a stampede, refusing costs no
// decoding or validation. It is a hint; Admit still decides.
func (l *Limiter) Full(e *registry.Entry) error {
	b := l.bulkhead(e)
	if l.cap > 0 && l.global.Load() >= l.cap {
		b.rejected(ReasonGlobalCap)
		return overload(tools.CodeGlobalCapacity, "toold is at its global capacity", b.retryAfter(b.lim().Queue()+1))
	}
	return b.full()
}

// ServiceTime is the mean time e's calls held their slot on this replica
// (weighted 1/8 to the latest, as Retry-After estimates read it); zero
// before its first call ended.
func (l *Limiter) ServiceTime(e *registry.Entry) time.Duration { return l.bulkhead(e).service.mean() }

// Stuck accounts a call of e that keeps running after its context was
// cancelled (the dispatcher calls it once the call outlives its deadline by
// StuckAfter). When detach is true the caller may free the call's slot now,
// before the call returns; done must be called when it does return. The
// count is exported as StuckCalls, for /readyz.
func (l *Limiter) Stuck(e *registry.Entry) (detach bool, done func()) {
	return l.bulkhead(e).stuckCall()
}

// StuckCalls counts, by tool, the calls running past their cancelled
// context; tools with none are absent.
func (l *Limiter) StuckCalls() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out map[string]int
	for name, b := range l.bulk {
		b.mu.Lock()
		if b.stuck > 0 {
			if out == nil {
				out = map[string]int{}
			}
			out[name] = b.stuck
		}
		b.mu.Unlock()
	}
	return out
}

func overload(code tools.Code, msg string, retry time.Duration) *tools.Error {
	return tools.Errorf(tools.OverloadError, "%s", msg).WithCode(code).WithRetryAfter(retry).
		WithSuggestion("retry after %v", retry.Round(time.Millisecond))
}

// SetServerCaps replaces the caps of Options.ServerCaps while the limiter
// serves (a reload). A source that keeps a cap keeps its count of calls
// running, so a smaller cap refuses new calls until enough of them end;
// a source that loses its cap lets every new call through.
func (l *Limiter) SetServerCaps(caps map[string]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	next := map[string]*serverCap{}
	var old map[string]*serverCap
	if p := l.servers.Load(); p != nil {
		old = *p
	}
	for name, n := range caps {
		if n <= 0 {
			continue
		}
		s := old[name]
		if s == nil {
			s = &serverCap{name: name}
		}
		s.cap.Store(int64(n))
		next[name] = s
	}
	l.servers.Store(&next)
}

// serverCap counts the calls running on the tools of one source. It has
// no queue of its own: a call waits, if at all, in its tool's bulkhead.
type serverCap struct {
	name    string
	cap     atomic.Int64
	running atomic.Int64
	service ewma // of the source's calls, for Retry-After
}

// enter takes a running slot of the server for a call that holds its
// tool's slot (release frees that one). When the server has none, the
// tool's slot goes to the tool's next waiter and the call is refused. A
// nil serverCap (a tool of no capped source) lets every call through.
func (s *serverCap) enter(b *bulkhead, release func()) (func(), error) {
	if s == nil {
		return release, nil
	}
	limit := s.cap.Load()
	if s.running.Add(1) > limit {
		s.running.Add(-1)
		b.giveBack()
		b.rejected(ReasonServerCap)
		return nil, overload(tools.CodeServerCapacity, fmt.Sprintf("the MCP server %q has %d calls running, its limit", s.name, limit),
			s.retryAfter(b))
	}
	start := time.Now()
	return func() {
		// The server's slot first: the tool's may go straight to a
		// waiter, which then asks the server for one.
		s.service.observe(time.Since(start))
		s.running.Add(-1)
		release()
	}, nil
}

// retryAfter estimates when one of the server's slots frees: as a
// bulkhead's first queue place, one mean service time of the server's
// calls; before any has finished, the latency target of the tool asked
// for.
func (s *serverCap) retryAfter(b *bulkhead) time.Duration {
	return max(cmp.Or(s.service.mean(), b.lim().Target), time.Millisecond)
}
