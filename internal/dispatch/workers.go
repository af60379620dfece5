package dispatch

import (
	"context"
	"sync"
	"time"
)

// workers reuses the goroutines that run tools, and that prepare calls
// about to queue (see Dispatcher.run). A fresh goroutine starts with a
// small stack that decoding and validating arguments grow two or three
// times, a copy each time: about a fifth of the pipeline's CPU on a small
// call. A worker keeps its grown stack for the next call, and exits after
// idling, so a burst leaves nothing behind.
type workers struct {
	jobs chan job
	idle time.Duration
}

// job is what a worker runs: a *task, or a *running execution.
type job interface{ run() }

func newWorkers(idle time.Duration) *workers {
	return &workers{jobs: make(chan job), idle: idle}
}

// start hands j to an idle worker, or starts one. It never blocks, so the
// number of workers follows the calls running (which the bulkheads bound).
func (w *workers) start(j job) {
	select {
	case w.jobs <- j:
	default:
		go w.loop(j)
	}
}

// Go runs f on one of the dispatcher's workers and returns at once: for a
// caller that would start a goroutine to run a call through Execute (an
// async call run where it was accepted), so the pipeline's deep work does
// not grow a fresh stack each time. f must not panic: nothing recovers
// it there, as nothing would on a goroutine of the caller's own.
func (d *Dispatcher) Go(f func()) { d.workers.start(funcJob(f)) }

// funcJob is a plain function as a worker's job.
type funcJob func()

func (f funcJob) run() { f() }

// task is a step run on a worker while the caller waits, reused from a
// pool: the hot path's hand-off to a worker and back allocates nothing.
type task struct {
	do      func(*task) // a plain function, so no closure is allocated
	d       *Dispatcher
	ctx     context.Context
	c       *call
	err     error // do's result
	failure any   // a panic in do
	done    chan struct{}
}

var tasks = sync.Pool{New: func() any { return &task{done: make(chan struct{}, 1)} }}

func newTask(do func(*task), d *Dispatcher, ctx context.Context, c *call) *task {
	t := tasks.Get().(*task)
	t.do, t.d, t.ctx, t.c = do, d, ctx, c
	return t
}

// free returns t to the pool; the caller has read what it needs.
func (t *task) free() {
	*t = task{done: t.done}
	tasks.Put(t)
}

func (t *task) run() {
	defer func() {
		t.failure = recover()
		t.done <- struct{}{} // the worker's last touch of t
	}()
	t.do(t)
}

// await runs t on a worker and waits for it to finish. A panic in it is
// raised again in the caller, where the server's recoverer answers it: a
// worker must never take the process down.
func (w *workers) await(t *task) {
	w.start(t)
	<-t.done
	if p := t.failure; p != nil {
		t.free()
		panic(p)
	}
}

func (w *workers) loop(j job) {
	t := time.NewTimer(w.idle)
	defer t.Stop()
	for {
		j.run()
		t.Reset(w.idle)
		select {
		case j = <-w.jobs:
		case <-t.C:
			return
		}
	}
}
