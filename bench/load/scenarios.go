package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

var echoBody = []byte(`{"message":"hello, toold","data":{"n":1,"tags":["a","b"]}}`)

// stats are one measured run.
type stats struct {
	n       int
	elapsed time.Duration
	lat     []time.Duration
	errs    int
}

func (s *stats) rate() float64 { return float64(s.n) / s.elapsed.Seconds() }

func pct(lat []time.Duration, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	slices.Sort(lat)
	return lat[min(len(lat)-1, int(float64(len(lat))*p))]
}

// closedLoop runs conns connections, each sending the next request as soon
// as the last answer arrived, for d; ok judges each answer.
func closedLoop(addr string, req []byte, conns int, d time.Duration, ok func(reply) bool) (*stats, error) {
	return loop(addr, conns, d, func(c *conn, end time.Time) (bool, error) {
		rep, err := c.do(req, end.Add(10*time.Second))
		if err != nil {
			return false, err
		}
		return ok(rep), nil
	})
}

// loop runs conns connections, each starting the next step as soon as the
// last ended, for d, timing each step; a step that fails (false) is a bad
// answer, one that errs ends the run with its error.
func loop(addr string, conns int, d time.Duration, step func(c *conn, end time.Time) (bool, error)) (*stats, error) {
	var mu sync.Mutex
	all := &stats{}
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	errc := make(chan error, conns)
	for range conns {
		c, err := dial(addr)
		if err != nil {
			return nil, err
		}
		wg.Go(func() {
			defer c.close()
			lat := make([]time.Duration, 0, 1<<16)
			bad := 0
			for time.Now().Before(end) {
				t0 := time.Now()
				ok, err := step(c, end)
				if err != nil {
					errc <- err
					return
				}
				lat = append(lat, time.Since(t0))
				if !ok {
					bad++
				}
			}
			mu.Lock()
			all.lat = append(all.lat, lat...)
			all.errs += bad
			mu.Unlock()
		})
	}
	wg.Wait()
	all.elapsed = time.Since(start)
	all.n = len(all.lat)
	select {
	case err := <-errc:
		return nil, err
	default:
	}
	return all, nil
}

// target is one server of a throughput comparison.
type target struct {
	name string
	addr string
	req  []byte
	ok   func(reply) bool
}

func throughput(o options, bareAddr, tooldAddr string) error {
	total, err := compare(o, "Throughput", []target{
		{"bare net/http", bareAddr, request(bareAddr, "/echo", echoBody), func(r reply) bool { return r.status == 200 }},
		{"toold echo", tooldAddr, request(tooldAddr, "/tools/echo/execute", echoBody), restOK},
	})
	if err != nil {
		return err
	}
	ratio := total[1].rate() / total[0].rate()
	fmt.Printf("\ntoold/bare throughput: %.0f%% (target >= 60%%); toold p99 %v (target < 10ms)\n",
		100*ratio, pct(total[1].lat, .99).Round(time.Microsecond))
	return nil
}

func restOK(r reply) bool { return r.status == 200 && bytes.Contains(r.body, []byte(`"success":true`)) }

// compare drives the targets alternately with the same closed-loop
// generator, after a warm-up of each, and prints their req/s and latency.
func compare(o options, title string, targets []target) ([]*stats, error) {
	return compareAround(o, title, targets, nil)
}

// compareAround is compare calling around, when set, just before each
// measured round (round 0 the first) of targets[i], and what it returns
// just after: for figures of the round besides the generator's.
func compareAround(o options, title string, targets []target, around func(i, round int) (after func()), extra ...column) ([]*stats, error) {
	total := make([]*stats, len(targets))
	for i := range total {
		total[i] = &stats{}
	}
	for _, t := range targets { // warm up each, not counted
		if _, err := closedLoop(t.addr, t.req, o.conns, time.Second, t.ok); err != nil {
			return nil, fmt.Errorf("%s: %w", t.name, err)
		}
	}
	for round := range o.rounds {
		for i, t := range targets {
			after := func() {}
			if around != nil {
				after = around(i, round)
			}
			s, err := closedLoop(t.addr, t.req, o.conns, o.round, t.ok)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", t.name, err)
			}
			after()
			total[i].n += s.n
			total[i].elapsed += s.elapsed
			total[i].errs += s.errs
			total[i].lat = append(total[i].lat, s.lat...)
		}
	}
	fmt.Printf("\n## %s: %d connections, %d alternating rounds of %v each\n\n", title, o.conns, o.rounds, o.round)
	head, rule := "| server | req/s | p50 | p99 | bad answers |", "|---|---|---|---|---|"
	for _, c := range extra {
		head, rule = head+" "+c.name+" |", rule+"---|"
	}
	fmt.Println(head)
	fmt.Println(rule)
	for i, t := range targets {
		s := total[i]
		fmt.Printf("| %s | %.0f | %v | %v | %d |", t.name, s.rate(), pct(s.lat, .50).Round(time.Microsecond),
			pct(s.lat, .99).Round(time.Microsecond), s.errs)
		for _, c := range extra {
			fmt.Printf(" %s |", c.value(i, total))
		}
		fmt.Println()
	}
	return total, nil
}

// column is an extra column of compareAround's table: its heading, and
// its cell for targets[i], given what the generator measured of each.
type column struct {
	name  string
	value func(i int, total []*stats) string
}

// overload hits the sleep tool (10 in flight, 100 queued, 50 ms per call)
// with many clients, twice: clients that wait the retry_after_ms the
// envelope gives them (as toold documents), then clients that retry at once
// (a stampede, the worst case).
func overload(o options, td *server) error {
	fmt.Printf("\n## Overload: %d clients for %v each run, on a tool with 10 in flight, 100 queued, 50 ms per call\n\n", o.clients, o.overload)
	fmt.Println("| clients | accepted | rejected (429) | other envelopes | lost | max in flight | rejection p99 | accepted p99 |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	for _, honour := range []bool{true, false} {
		r := stampede(o, td, honour)
		name := "honour retry_after_ms"
		if !honour {
			name = "retry at once"
		}
		fmt.Printf("| %s | %d | %d | %d | %d | %d | %v | %v |\n", name, r.accepted, r.rejected, r.other, r.lost,
			r.maxInFlight, pct(r.rejLat, .99).Round(time.Microsecond), pct(r.accLat, .99).Round(time.Millisecond))
	}
	fmt.Println("\ntargets: lost 0, max in flight 10, rejection p99 < 5ms")
	return nil
}

type stampedeResult struct {
	accepted, rejected, other, lost int64
	maxInFlight                     int
	accLat, rejLat                  []time.Duration
}

var retryAfterRE = regexp.MustCompile(`"retry_after_ms":([0-9]+)`)

func stampede(o options, td *server, honour bool) *stampedeResult {
	req := request(td.addr, "/tools/sleep/execute", []byte(`{"ms":50}`))
	var accepted, rejected, other, lost atomic.Int64
	var mu sync.Mutex
	res := &stampedeResult{}
	stopPoll := make(chan struct{})
	maxInFlight := make(chan int, 1)
	go func() { maxInFlight <- pollMax(td.admin, `toold_tool_in_flight{tool="sleep"}`, stopPoll) }()
	var wg sync.WaitGroup
	end := time.Now().Add(o.overload)
	for range o.clients {
		wg.Go(func() {
			c, err := dial(td.addr)
			if err != nil {
				lost.Add(1)
				return
			}
			defer func() { c.close() }()
			var acc, rej []time.Duration
			for time.Now().Before(end) {
				t0 := time.Now()
				rep, err := c.do(req, end.Add(30*time.Second))
				d := time.Since(t0)
				switch {
				case err != nil:
					lost.Add(1)
					if c, err = dial(td.addr); err != nil {
						return
					}
					continue
				case rep.status == 200 && bytes.Contains(rep.body, []byte(`"success":true`)):
					accepted.Add(1)
					acc = append(acc, d)
				case rep.status == 429 && rep.retryAfter && bytes.Contains(rep.body, []byte(`"overload_error"`)):
					rejected.Add(1)
					rej = append(rej, d)
					if m := retryAfterRE.FindSubmatch(rep.body); honour && m != nil {
						ms, _ := strconv.Atoi(string(m[1]))
						time.Sleep(min(time.Duration(ms)*time.Millisecond, time.Until(end)))
					}
				case bytes.Contains(rep.body, []byte(`"request_id"`)): // an envelope, of another kind
					other.Add(1)
				default:
					lost.Add(1)
				}
			}
			mu.Lock()
			res.accLat, res.rejLat = append(res.accLat, acc...), append(res.rejLat, rej...)
			mu.Unlock()
		})
	}
	wg.Wait()
	close(stopPoll)
	res.accepted, res.rejected, res.other, res.lost = accepted.Load(), rejected.Load(), other.Load(), lost.Load()
	res.maxInFlight = <-maxInFlight
	return res
}

// pollMax samples a gauge on toold's admin listener until stop closes and
// returns the largest value seen.
func pollMax(admin, series string, stop <-chan struct{}) int {
	best := 0
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		select {
		case <-stop:
			return best
		default:
		}
		if v, ok := gauge(client, admin, series); ok && int(v) > best {
			best = int(v)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func gauge(client *http.Client, admin, series string) (float64, bool) {
	resp, err := client.Get(admin + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}

// memory parks callers in a queue and reads toold's RSS.
func memory(o options, bin, dir string, pinned bool, mainIdle int64) error {
	cfg := fmt.Sprintf(`
tools:
  sleep: {enabled: true, limits: {max_in_flight: 10, max_queue: %d, timeout: 60s, max: 60s, target: 1s, queue_wait: 60s}}
server: {max_connections: %d}
`, o.queued, o.queued+100)
	td, err := startToold(bin, dir, "memory", cfg, pinned)
	if err != nil {
		return err
	}
	defer td.stop()
	idle := td.rss()
	req := request(td.addr, "/tools/sleep/execute", []byte(`{"ms":30000}`))
	var conns []*conn
	defer func() {
		for _, c := range conns {
			c.close()
		}
	}()
	for range o.queued + 10 {
		c, err := dial(td.addr)
		if err != nil {
			return err
		}
		if _, err := c.c.Write(req); err != nil {
			return err
		}
		conns = append(conns, c)
	}
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if v, ok := gauge(client, td.admin, `toold_tool_queue_depth{tool="sleep"}`); ok && int(v) == o.queued {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the queue never held %d callers", o.queued)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	queued := td.rss()
	const mib = 1 << 20
	fmt.Printf("\n## Memory (RSS)\n\n")
	fmt.Println("| toold | RSS |")
	fmt.Println("|---|---|")
	fmt.Printf("| idle, after start | %.1f MiB |\n", float64(mainIdle)/mib)
	fmt.Printf("| idle (second instance) | %.1f MiB |\n", float64(idle)/mib)
	fmt.Printf("| with %d callers queued | %.1f MiB (+%.1f MiB, %.1f KiB per caller) |\n", o.queued,
		float64(queued)/mib, float64(queued-idle)/mib, float64(queued-idle)/1024/float64(o.queued))
	fmt.Println("\ntargets: idle < 40 MiB with the embedded state store; +30 MiB or less with 1,000 queued")
	return nil
}
