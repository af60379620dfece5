//go:build linux

package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Kinds of calls the load makes.
const (
	kindSync       = "sync"        // echo, answered now: needs no store
	kindAsync      = "async"       // sleep 300ms, Prefer: respond-async
	kindAsyncWait  = "async_wait"  // sleep 50ms, Prefer: respond-async, wait=5
	kindAsyncQuick = "async_quick" // echo, Prefer: respond-async: runs where accepted once echo is known quick there
	kindMark       = "mark"        // the non-idempotent command, async, 1.5s
	kindIdemSync   = "idem_sync"   // mark under an Idempotency-Key, sync, retried
	kindIdemAsync  = "idem_async"  // mark under an Idempotency-Key, async, retried
	kindBatch      = "batch"       // three echo calls in one batch, now
	kindBatchAsync = "batch_async" // the same batch, Prefer: respond-async
	kindApproval   = "approval"    // approved_mark: waits for a person
	kindAnswer     = "answer"      // request_user_input: waits for an answer
)

// mix is how often each kind comes up, out of its sum.
var mix = []struct {
	kind   string
	weight int
}{{kindSync, 6}, {kindAsync, 4}, {kindAsyncWait, 3}, {kindAsyncQuick, 2}, {kindMark, 2}, {kindIdemSync, 2}, {kindIdemAsync, 2},
	{kindBatch, 2}, {kindBatchAsync, 1}, {kindApproval, 2}, {kindAnswer, 2}}

// needsStore reports whether a kind of call cannot be answered without
// the store (while quorum is lost it must be refused, 503).
func needsStore(kind string) bool { return kind != kindSync && kind != kindBatch }

// op is one call of the load and everything answered about it.
type op struct {
	n          int
	kind       string
	replica    string
	start, end time.Time
	a          *answer // the (last) answer to the call itself
	poll       *answer // async: GET ?wait=15s right after its 202, on any replica
	pollTook   time.Duration
	attempts   int    // requests made for it (idempotency retries)
	exec       string // its execution, when it has one
	token      string // its mark's token (mark, idem, approval)
	key        string // its Idempotency-Key
	// Decisions and resumptions, for approval and answer.
	approve   bool
	answered  string // the answer a resumption carried that was taken
	applied   int    // decisions or resumptions answered 200
	refused   int    // those answered 409 (decided, resumed already)
	unknown   int    // those whose outcome is unknown: 5xx, or no answer
	unsettled bool   // its wait was never decided within the bounds
	lastTry   string // the last refusal of a decision or resumption
	// Replays of an idempotency key that answered differently.
	replayMismatch string
}

// accepted reports whether toold took the call on: a 200 or 202.
func (o *op) accepted() bool { return o.a != nil && (o.a.status == 200 || o.a.status == 202) }

// load drives the replicas with the mix until stop, each worker making
// one call at a time; waiting executions go to the deciders.
type load struct {
	h       *harness
	agent   *client
	ops     []*op
	mu      sync.Mutex
	n       atomic.Int64
	waits   chan *op // approvals and questions to decide
	stop    chan struct{}
	wg      sync.WaitGroup
	decided sync.WaitGroup
}

func newLoad(h *harness) *load {
	return &load{h: h, agent: newClient(agentKey), waits: make(chan *op, 100_000), stop: make(chan struct{})}
}

// run starts workers call makers and two deciders.
func (l *load) run(workers int) {
	for w := range workers {
		l.wg.Go(func() { l.worker(w) })
	}
	for range 2 {
		l.decided.Go(l.decider)
	}
}

// finish stops the call makers, then lets the deciders drain what waits.
func (l *load) finish() {
	close(l.stop)
	l.wg.Wait()
	close(l.waits)
	l.decided.Wait()
}

func (l *load) worker(w int) {
	rng := rand.New(rand.NewPCG(uint64(w), 42))
	total := 0
	for _, m := range mix {
		total += m.weight
	}
	for i := 0; i < 1_000_000; i++ { // bounded; stop ends it long before
		select {
		case <-l.stop:
			return
		default:
		}
		if interrupted.Load() {
			return
		}
		pick := rng.IntN(total)
		kind := mix[0].kind
		for _, m := range mix {
			if pick < m.weight {
				kind = m.kind
				break
			}
			pick -= m.weight
		}
		o := l.call(kind, rng)
		if o == nil {
			time.Sleep(50 * time.Millisecond) // no replica serves now
			continue
		}
		l.mu.Lock()
		l.ops = append(l.ops, o)
		l.mu.Unlock()
		if o.a.status == 0 || o.a.status >= 500 {
			time.Sleep(20 * time.Millisecond) // do not spin against a replica that is down
		}
	}
}

// call makes one call of kind on a replica that should be serving.
func (l *load) call(kind string, rng *rand.Rand) *op {
	r := l.h.pick(rng)
	if r == nil {
		return nil
	}
	n := int(l.n.Add(1))
	o := &op{n: n, kind: kind, replica: r.name, start: time.Now(), attempts: 1}
	token := fmt.Sprintf("t%d-%d", n, rng.IntN(1_000_000))
	switch kind {
	case kindSync:
		o.a = l.agent.do("POST", r.url+"/tools/echo/execute", fmt.Sprintf(`{"message":"m%d"}`, n))
	case kindAsync, kindAsyncQuick:
		tool, body := "sleep", `{"ms":300}`
		if kind == kindAsyncQuick {
			tool, body = "echo", fmt.Sprintf(`{"message":"q%d"}`, n)
		}
		o.a = l.agent.do("POST", r.url+"/tools/"+tool+"/execute", body, "Prefer", "respond-async")
		if p := l.h.pick(rng); p != nil && o.a.status == 202 {
			t0 := time.Now()
			o.poll = l.agent.do("GET", p.url+o.a.location+"?wait=15s", "")
			o.pollTook = time.Since(t0)
		}
	case kindAsyncWait:
		o.a = l.agent.do("POST", r.url+"/tools/sleep/execute", `{"ms":50}`, "Prefer", "respond-async, wait=5")
	case kindMark:
		o.token = token
		o.a = l.agent.do("POST", r.url+"/tools/mark/execute", markBody(token, "1.5"), "Prefer", "respond-async")
	case kindIdemSync, kindIdemAsync:
		o.token, o.key = token, "k-"+token
		l.idempotent(o, rng)
	case kindBatch, kindBatchAsync:
		body := `{"calls":[{"id":"a","tool":"echo","arguments":{"message":"a"}},{"id":"b","tool":"echo","arguments":{"message":"b"}},` +
			`{"id":"c","tool":"sleep","arguments":{"ms":20}}]}`
		if kind == kindBatch {
			o.a = l.agent.do("POST", r.url+"/batch", body)
		} else {
			o.a = l.agent.do("POST", r.url+"/batch", body, "Prefer", "respond-async")
		}
	case kindApproval:
		o.token, o.approve = token, rng.IntN(4) != 0
		o.a = l.agent.do("POST", r.url+"/tools/approved_mark/execute", markBody(token, "0.1"))
	case kindAnswer:
		o.a = l.agent.do("POST", r.url+"/tools/request_user_input/execute", fmt.Sprintf(`{"prompt":"question %d?"}`, n))
	}
	o.end = time.Now()
	o.exec = o.a.env.ExecutionID
	if (kind == kindApproval || kind == kindAnswer) && o.a.status == 202 && o.exec != "" {
		l.waits <- o
	}
	return o
}

func markBody(token, seconds string) string {
	return fmt.Sprintf(`{"token":%q,"seconds":%q}`, token, seconds)
}

// idempotent sends a call under an Idempotency-Key, then sends it again
// (on any replica) until an answer that stands, for up to 50 seconds
// (longer than the key's lease: the mark's 20s timeout and 10s more, so a
// retry can find the claim of a replica that died): the key must make it
// run once, and every answer after the first must replay it.
func (l *load) idempotent(o *op, rng *rand.Rand) {
	headers := []string{"Idempotency-Key", o.key}
	if o.kind == kindIdemAsync {
		headers = append(headers, "Prefer", "respond-async")
	}
	var first *answer
	deadline := time.Now().Add(50 * time.Second)
	for attempt := 1; attempt <= 40 && time.Now().Before(deadline); attempt++ {
		r := l.h.pick(rng)
		if r == nil {
			time.Sleep(time.Second)
			continue
		}
		a := l.agent.do("POST", r.url+"/tools/mark/execute", markBody(o.token, "0.2"), headers...)
		o.a, o.attempts = a, attempt
		if a.status == 200 || a.status == 202 {
			if first == nil {
				first, o.replica = a, r.name
			} else if a.env.ExecutionID != first.env.ExecutionID || a.env.Status != first.env.Status && o.kind == kindIdemSync {
				o.replayMismatch = fmt.Sprintf("answer %d: %s %s, first %s %s", attempt, a.env.Status, a.env.ExecutionID, first.env.Status, first.env.ExecutionID)
			}
			if rng.IntN(2) == 0 || attempt > 2 {
				break // one replay is enough most of the time
			}
			continue
		}
		time.Sleep(time.Duration(min(attempt, 5)) * 300 * time.Millisecond) // 409 in flight, 503, no answer: retry
	}
	if first != nil {
		o.a = first
	}
}

// decider approves or denies calls waiting for a person, and answers
// questions, each on a random replica after a short while, sending each
// decision a second time to another replica: the second must be refused.
func (l *load) decider() {
	approver := newClient(approverKey)
	rng := rand.New(rand.NewPCG(7, 7))
	for o := range l.waits {
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		url, c, body := "/approvals/"+o.exec, approver, fmt.Sprintf(`{"approve":%v,"reason":"chaos"}`, o.approve)
		if o.kind == kindAnswer {
			o.answered = fmt.Sprintf("a%d", o.n)
			url, c, body = "/executions/"+o.exec+"/resume", l.agent, fmt.Sprintf(`{"answer":%q}`, o.answered)
		}
		for attempt := 0; attempt < 40 && o.applied+o.refused < 2; attempt++ {
			r := l.h.pick(rng)
			if r == nil {
				time.Sleep(500 * time.Millisecond)
				continue
			}
			a := c.do("POST", r.url+url, body)
			switch {
			case a.status == 200 || a.status == 202:
				o.applied++
			case a.status == 409 && (strings.Contains(a.code(), "decided") || a.code() == "not_waiting" || a.code() == "execution_ended"):
				o.refused++
			default:
				if a.status == 0 || a.status >= 500 {
					o.unknown++ // it may have been taken: the next try says
				}
				o.lastTry = fmt.Sprintf("%d %s", a.status, a.code())
				time.Sleep(time.Duration(min(attempt+1, 5)) * 200 * time.Millisecond) // the store or the replica is away
			}
		}
		o.unsettled = o.applied == 0 && o.refused == 0
	}
}
