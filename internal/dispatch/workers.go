package dispatch

import "time"

// workers reuses the goroutines that run tools. A fresh goroutine starts
// with a small stack that decoding and validating arguments grow two or
// three times, a copy each time: about a fifth of the pipeline's CPU on a
// small call. A worker keeps its grown stack for the next call, and exits
// after idling, so a burst leaves nothing behind.
type workers struct {
	jobs chan func()
	idle time.Duration
}

func newWorkers(idle time.Duration) *workers {
	return &workers{jobs: make(chan func()), idle: idle}
}

// run hands job to an idle worker, or starts one. It never blocks, so the
// number of workers follows the calls running (which the bulkheads bound).
func (w *workers) run(job func()) {
	select {
	case w.jobs <- job:
	default:
		go w.loop(job)
	}
}

// await runs job on a worker and waits for it to finish. A panic in job is
// raised again in the caller, where the server's recoverer answers it: a
// worker must never take the process down.
func (w *workers) await(job func()) {
	done := make(chan struct{})
	var failure any
	w.run(func() {
		defer close(done)
		defer func() { failure = recover() }()
		job()
	})
	<-done
	if failure != nil {
		panic(failure)
	}
}

func (w *workers) loop(job func()) {
	t := time.NewTimer(w.idle)
	defer t.Stop()
	for {
		job()
		t.Reset(w.idle)
		select {
		case job = <-w.jobs:
		case <-t.C:
			return
		}
	}
}
