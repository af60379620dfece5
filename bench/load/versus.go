package main

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// versus measures this build against another (-base), side by side in one
// run, for the targets of issue 29 (docs/performance.md, "Faults and
// scale-out"): the same generator, the same machine, the two builds'
// servers alternating round by round, so that a machine others share
// moves both alike.
//
//  1. the store's cost: sync echo at -conns connections, store off and on
//     (embedded), in calls per CPU-second of toold, per round and in all;
//  2. async against sync at p50, on the embedded store and on a
//     three-node cluster of each build's own, at one and eight
//     connections: a sync echo, then the one-request form (Prefer:
//     respond-async, wait=10), then submit and GET ?wait — each round's
//     ratios against that round's own sync p50.
//
// -only versus-cost runs the first part alone (no cluster), so that many
// long rounds, which the store's cost needs to rise above a shared
// machine's noise, fit in a few minutes.
func versus(o options, bin, dir string, pinned bool) error {
	if o.base == "" {
		return fmt.Errorf("-only versus needs -base, the toold build to measure against")
	}
	builds := []*build{{name: "this", bin: bin}, {name: "base", bin: o.base}}
	defer func() {
		for _, b := range builds {
			b.stop()
		}
	}()
	costOnly := !o.runs("versus")
	for _, b := range builds {
		if err := b.start(o, dir, pinned, !costOnly); err != nil {
			return fmt.Errorf("%s build: %w", b.name, err)
		}
	}
	if err := storeCostVersus(o, builds); err != nil {
		return err
	}
	if costOnly {
		return nil
	}
	for _, store := range []string{"embedded store", "three-node cluster"} {
		for _, conns := range []int{1, 8} {
			if err := asyncVersus(o, builds, store, conns); err != nil {
				return err
			}
		}
	}
	return nil
}

// build is one toold build's servers: store off, embedded, on a cluster.
type build struct {
	name, bin       string
	off, on, clustd *server
	stops           []func()
}

func (b *build) start(o options, dir string, pinned, cluster bool) error {
	var err error
	if b.off, err = startToold(b.bin, dir, b.name+"-off", "state: {enabled: false}\ntools:\n  echo: {enabled: true}\n", pinned); err != nil {
		return err
	}
	b.stops = append(b.stops, b.off.stop)
	if b.on, err = startToold(b.bin, dir, b.name+"-on", "tools:\n  echo: {enabled: true}\n", pinned); err != nil {
		return err
	}
	b.stops = append(b.stops, b.on.stop)
	if !cluster {
		return nil
	}
	td, stop, err := startCluster(o, b.bin, dir, b.name+"-cluster", pinned)
	if err != nil {
		return err
	}
	b.clustd = td
	b.stops = append(b.stops, stop, td.stop)
	return nil
}

func (b *build) stop() {
	for i := len(b.stops) - 1; i >= 0; i-- {
		b.stops[i]()
	}
	b.stops = nil
}

// tally is one server's sync echo calls in a round and the CPU toold
// spent on them.
type tally struct {
	n   int
	cpu time.Duration
}

func (t tally) perCPU() float64 { return float64(t.n) / t.cpu.Seconds() }

func (t tally) plus(u tally) tally { return tally{t.n + u.n, t.cpu + u.cpu} }

// measure runs the sync echo on s at o.conns connections for o.round and
// reads the CPU toold spent meanwhile.
func measure(o options, s *server) (tally, error) {
	c0 := s.cpu()
	st, err := closedLoop(s.addr, request(s.addr, "/tools/echo/execute", echoBody), o.conns, o.round, restOK)
	if err != nil {
		return tally{}, err
	}
	return tally{st.n, s.cpu() - c0}, nil
}

// storeCostVersus runs the sync echo on each build's store-off and
// store-on servers in turn, o.rounds times, and prints each round's
// on/off ratio of calls per CPU-second for each build.
func storeCostVersus(o options, builds []*build) error {
	var servers []*server
	for _, b := range builds {
		servers = append(servers, b.off, b.on)
	}
	for _, s := range servers { // warm up, not counted
		if _, err := closedLoop(s.addr, request(s.addr, "/tools/echo/execute", echoBody), o.conns, time.Second, restOK); err != nil {
			return err
		}
	}
	rounds := make([][]tally, o.rounds)
	total := make([]tally, len(servers))
	for r := range rounds {
		rounds[r] = make([]tally, len(servers))
		for i, s := range servers {
			t, err := measure(o, s)
			if err != nil {
				return err
			}
			rounds[r][i], total[i] = t, total[i].plus(t)
		}
	}
	fmt.Printf("\n## The store's cost, this build against the base: sync echo, %d connections, %d alternating rounds of %v\n\n", o.conns, o.rounds, o.round)
	fmt.Println("| round | this: off | this: on | this: on/off | base: off | base: on | base: on/off |")
	fmt.Println("|---|---|---|---|---|---|---|")
	row := func(label string, ts []tally) {
		fmt.Printf("| %s |", label)
		for b := range builds {
			off, on := ts[2*b].perCPU(), ts[2*b+1].perCPU()
			fmt.Printf(" %.0f | %.0f | %.1f%% |", off, on, 100*on/off)
		}
		fmt.Println()
	}
	for r, ts := range rounds {
		row(fmt.Sprint(r+1), ts)
	}
	row("all", total)
	fmt.Println("\n(calls per CPU-second of toold, read from /proc; target on/off >= 95%)")
	return storeCostTogether(o, builds)
}

// storeCostTogether is storeCostVersus with each build's store-off and
// store-on servers loaded at the same time (the builds still in turn):
// the two share the core and whatever else the machine does in those
// seconds, so what moves the rounds apart — another tenant's load, the
// CPU's clock — moves both alike, and their ratio is far steadier than
// that of runs seconds apart. Each gets the same closed loop as alone.
func storeCostTogether(o options, builds []*build) error {
	fmt.Printf("\n## The same, each build's store-off and store-on servers loaded at once: %d connections each, %d rounds of %v\n\n", o.conns, o.rounds, o.round)
	fmt.Println("| round | this: on/off | base: on/off |")
	fmt.Println("|---|---|---|")
	total := make([][2]tally, len(builds))
	ratios := make([][]float64, len(builds))
	for r := range o.rounds {
		fmt.Printf("| %d |", r+1)
		for i, b := range builds {
			var ts [2]tally
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for j, s := range []*server{b.off, b.on} {
				wg.Go(func() { ts[j], errs[j] = measure(o, s) })
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				return err
			}
			ratio := ts[1].perCPU() / ts[0].perCPU()
			ratios[i] = append(ratios[i], ratio)
			for j := range ts {
				total[i][j] = total[i][j].plus(ts[j])
			}
			fmt.Printf(" %.1f%% |", 100*ratio)
		}
		fmt.Println()
	}
	fmt.Print("| all |")
	for i := range builds {
		fmt.Printf(" %.1f%% |", 100*total[i][1].perCPU()/total[i][0].perCPU())
	}
	fmt.Print("\n| median |")
	for i := range builds {
		rs := slices.Sorted(slices.Values(ratios[i]))
		fmt.Printf(" %.1f%% |", 100*rs[len(rs)/2])
	}
	fmt.Println()
	return nil
}

// asyncVersus measures the three forms on each build in turn (the order
// swapped every round), o.rounds times, and prints each round's p50s and
// ratios, and each form's rate (calls, or submit-and-GET pairs, a second:
// at more than one connection toold's core is busy, and the rate says
// what each form costs it).
func asyncVersus(o options, builds []*build, store string, conns int) error {
	const d = 2 * time.Second
	fmt.Printf("\n## Async against sync, %s, %d connection(s): %d rounds, %v per form, builds alternating\n\n", store, conns, o.rounds, d)
	fmt.Println("| round | build | sync p50 | one request p50 | ratio (target <= 2x) | submit then GET p50 | ratio (target <= 3x) | per second: sync, one request, submit then GET |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	ratios := map[string][2][]float64{}
	for r := range o.rounds {
		order := slices.Clone(builds)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, b := range order {
			td := b.on
			if store != "embedded store" {
				td = b.clustd
			}
			f, err := asyncForms(td, conns, d)
			if err != nil {
				return fmt.Errorf("%s build: %w", b.name, err)
			}
			s, one, two := pct(f.sync.lat, .5), pct(f.oneStep.lat, .5), pct(f.twoStep.lat, .5)
			fmt.Printf("| %d | %s | %v | %v | %.2fx | %v | %.2fx | %.0f, %.0f, %.0f |\n", r+1, b.name, s.Round(time.Microsecond),
				one.Round(time.Microsecond), float64(one)/float64(s), two.Round(time.Microsecond), float64(two)/float64(s),
				f.sync.rate(), f.oneStep.rate(), f.twoStep.rate())
			rs := ratios[b.name]
			rs[0], rs[1] = append(rs[0], float64(one)/float64(s)), append(rs[1], float64(two)/float64(s))
			ratios[b.name] = rs
		}
	}
	for _, b := range builds {
		rs := ratios[b.name]
		fmt.Printf("\n%s, %s, %d connection(s): one request %.2f–%.2fx, submit then GET %.2f–%.2fx", b.name, store, conns,
			slices.Min(rs[0]), slices.Max(rs[0]), slices.Min(rs[1]), slices.Max(rs[1]))
	}
	fmt.Println()
	if store != "embedded store" && conns == 1 {
		// The floor under the cluster's ratios: one replicated write with
		// no toold in it, against the sync calls just measured.
		raw, err := rawPublish(builds[0].clustd.nats, 2000)
		if err != nil {
			return fmt.Errorf("a raw publish to the cluster: %w", err)
		}
		fmt.Printf("\none JetStream publish, 600 bytes, to a three-replica file stream on %s's cluster, from the generator (no toold): p50 %v\n",
			builds[0].name, raw.Round(time.Microsecond))
	}
	return nil
}
