package dispatch

import (
	"sync"
	"sync/atomic"

	"github.com/toold/toold/internal/policy"
	"github.com/toold/toold/internal/registry"
)

// Stages are the parts of the pipeline a reload builds whole from the new
// configuration — the sanitizer, the per-principal bounds, the policy and
// what it reads, the result budget — and swaps in together (Swap): a call
// keeps the stages it started with to its end, every later call gets the
// new ones. Options sets the first.
type Stages struct {
	Sanitizer  Sanitizer
	Principals PrincipalLimiter
	Policy     *policy.Engine
	Toolsets   registry.Toolsets
	// TracePayloads reports whether a tool's spans may carry its
	// (sanitized) arguments and result; nil allows none.
	TracePayloads func(tool string) bool
	// MaxResultBytes is the result budget of a tool that declares none
	// (server.max_result_bytes); zero or less: no budget.
	MaxResultBytes int64
}

// stagesRef is one set of stages and the calls that use it.
type stagesRef struct {
	Stages
	calls   atomic.Int64
	retired atomic.Bool
	once    sync.Once
	unused  chan struct{} // closed once retired with no call left
}

func newStagesRef(s Stages) *stagesRef { return &stagesRef{Stages: s, unused: make(chan struct{})} }

// idle closes unused if the stages are retired and no call uses them.
func (s *stagesRef) idle() {
	if s.retired.Load() && s.calls.Load() == 0 {
		s.once.Do(func() { close(s.unused) })
	}
}

// acquire returns the current stages, counted as used by one more call
// until release. A swap between the load and the count is seen by the
// second load: the call then takes the new stages instead, so retired
// stages never gain a call.
func (d *Dispatcher) acquire() *stagesRef {
	for {
		s := d.stages.Load()
		s.calls.Add(1)
		if d.stages.Load() == s {
			return s
		}
		d.release(s)
	}
}

func (d *Dispatcher) release(s *stagesRef) {
	if s.calls.Add(-1) == 0 {
		s.idle()
	}
}

// current is the stages now, for what is not a call (listings, the
// redaction of a refusal written outside the pipeline).
func (d *Dispatcher) current() *stagesRef { return d.stages.Load() }

// Swap makes next the stages of every call that starts from now on. The
// channel it returns is closed once no call uses the stages it replaced:
// then what only they used (a sanitizer's metrics, tools' clients) may be
// closed. Swap with the registry already holding the new tools: a call
// that still holds the old stages may resolve a new tool, never the
// reverse.
func (d *Dispatcher) Swap(next Stages) <-chan struct{} {
	old := d.stages.Swap(newStagesRef(next))
	old.retired.Store(true)
	old.idle()
	return old.unused
}

// Stages are the stages calls start with now: a reload copies them, sets
// what it rebuilt, and Swaps.
func (d *Dispatcher) Stages() Stages { return d.current().Stages }
