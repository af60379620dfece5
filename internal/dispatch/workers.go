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
