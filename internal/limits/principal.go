package limits

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"golang.org/x/time/rate"

	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/tools"
)

// PrincipalConfig bounds each principal (a key's holder, a token's
// subject) on its own, so one user behind a shared agent backend cannot
// starve the others (auth.limits). Zero fields set no bound.
type PrincipalConfig struct {
	// Rate is the calls per second one principal may start, with Burst
	// more at once (default: Rate rounded up, at least 1).
	Rate  float64 `yaml:"rate" validate:"gte=0"`
	Burst int     `yaml:"burst" validate:"gte=0"`
	// Share is the fraction (0-1] of each tool's bulkhead (its slots and
	// its queue) one principal may hold at once; at least one call.
	Share float64 `yaml:"share" validate:"gte=0,lte=1"`
}

// Enabled reports whether any bound is set.
func (c PrincipalConfig) Enabled() bool { return c.Rate > 0 || c.Share > 0 }

// maxPrincipals bounds the principals remembered; past it, those with
// nothing held and a full bucket (indistinguishable from new) are
// forgotten.
const maxPrincipals = 10_000

// Principals applies PrincipalConfig; safe for concurrent use.
type Principals struct {
	cfg      PrincipalConfig
	limit    rate.Limit
	burst    int
	mu       sync.Mutex
	peers    map[string]*principal
	refusals *prometheus.CounterVec
	now      func() time.Time
}

type principal struct {
	bucket *rate.Limiter
	held   map[string]int // calls held by tool
	total  int
}

// NewPrincipals builds the bounds; nil when none is set.
func NewPrincipals(c PrincipalConfig, reg prometheus.Registerer) *Principals {
	if !c.Enabled() {
		return nil
	}
	p := &Principals{cfg: c, limit: rate.Inf, peers: map[string]*principal{}, now: time.Now,
		refusals: promauto.With(reg).NewCounterVec(prometheus.CounterOpts{Name: "toold_principal_refusals_total",
			Help: "Calls refused because their principal passed its own bound, by bound: rate or share."}, []string{"limit"})}
	if c.Rate > 0 {
		p.limit, p.burst = rate.Limit(c.Rate), c.Burst
		if p.burst == 0 {
			p.burst = max(1, int(math.Ceil(c.Rate)))
		}
	}
	return p
}

// Charge spends one call of caller's rate, or refuses it with when to
// retry. A nil Principals charges nothing.
func (p *Principals) Charge(caller string) error { return p.ChargeN(caller, 1) }

// ChargeN spends n calls of caller's rate at once (an async batch's
// calls, accepted together), or none of them: it refuses with when to
// retry, or — more calls than the burst, which no wait makes room for —
// with how many may be sent at once.
func (p *Principals) ChargeN(caller string, n int) error {
	if p == nil || p.limit == rate.Inf || n <= 0 {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if n > p.burst {
		p.refusals.WithLabelValues("rate").Inc()
		return tools.Errorf(tools.OverloadError, "the %d calls are more than the %d the caller %q may start at once (auth.limits.burst)",
			n, p.burst, caller).WithCode(tools.CodePrincipalRate).
			WithSuggestion("send at most %d calls in one async batch, or ask the operator to raise auth.limits.burst", p.burst)
	}
	r := p.peer(caller).bucket.ReserveN(now, n)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		p.refusals.WithLabelValues("rate").Inc()
		e := tools.Errorf(tools.OverloadError, "the caller %q started more than its %g calls per second (auth.limits.rate, burst %d)",
			caller, p.cfg.Rate, p.burst).WithCode(tools.CodePrincipalRate).
			WithSuggestion("retry after Retry-After; the limit is each principal's own, other callers are not held back")
		e.RetryAfter = d
		return e
	}
	return nil
}

// Hold takes one of caller's share of e's bulkhead until release is
// called, or refuses the call. A nil Principals, or one without a share,
// holds nothing (release is nil).
func (p *Principals) Hold(caller string, e *registry.Entry) (release func(), err error) {
	if p == nil || p.cfg.Share <= 0 {
		return nil, nil
	}
	l := e.Spec.Limits
	limit := max(1, int(p.cfg.Share*float64(l.MaxInFlight+l.MaxQueue)))
	tool := e.Spec.Name
	p.mu.Lock()
	defer p.mu.Unlock()
	pr := p.peer(caller)
	if pr.held[tool] >= limit {
		p.refusals.WithLabelValues("share").Inc()
		e := tools.Errorf(tools.OverloadError, "the caller %q holds %d calls of %s already, its share of the tool (auth.limits.share %g of %d slots and queue places)",
			caller, pr.held[tool], tool, p.cfg.Share, l.MaxInFlight+l.MaxQueue).WithCode(tools.CodePrincipalShare).
			WithSuggestion("wait for one of those calls to end; other callers' calls are not held back")
		e.RetryAfter = max(time.Second, l.Target)
		return nil, e
	}
	pr.held[tool]++
	pr.total++
	var once sync.Once
	return func() { once.Do(func() { p.free(caller, tool) }) }, nil
}

func (p *Principals) free(caller, tool string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pr, ok := p.peers[caller]; ok {
		pr.held[tool]--
		pr.total--
		if pr.held[tool] <= 0 {
			delete(pr.held, tool)
		}
	}
}

// peer is caller's state, made on first use; p.mu is held.
func (p *Principals) peer(caller string) *principal {
	pr, ok := p.peers[caller]
	if ok {
		return pr
	}
	if len(p.peers) >= maxPrincipals {
		p.forgetIdle()
	}
	pr = &principal{bucket: rate.NewLimiter(p.limit, p.burst), held: map[string]int{}}
	p.peers[caller] = pr
	return pr
}

// forgetIdle drops principals holding nothing whose bucket is full again:
// remembering them changes nothing. p.mu is held.
func (p *Principals) forgetIdle() {
	now := p.now()
	for name, pr := range p.peers {
		if pr.total == 0 && (p.limit == rate.Inf || pr.bucket.TokensAt(now) >= float64(p.burst)) {
			delete(p.peers, name)
		}
	}
}

// String describes the bounds for the start-up log.
func (p *Principals) String() string {
	if p == nil {
		return "none"
	}
	return fmt.Sprintf("rate %g/s (burst %d), share %g", p.cfg.Rate, p.burst, p.cfg.Share)
}
