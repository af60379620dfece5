package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toold/toold/internal/state/statetest"
)

// executions measures what the state store costs and what it gives:
//
//  1. sync echo throughput with the store on (events and audit recorded)
//     and off, alternating, same generator, each warmed up first: the
//     store must cost <= 5%;
//  2. async submit-to-result latency against a sync call's, at the same
//     concurrency: submit (202) then GET ?wait, and the one-request form
//     Prefer: respond-async, wait=N;
//  3. 10,000 async executions: all accepted and all ending in success;
//  4. a batch of 16 echo calls against 16 sequential calls;
//  5. idle RSS with the embedded store and without.
func executions(o options, bin, dir string, pinned bool, on *server, onIdle int64) error {
	off, err := startToold(bin, dir, "nostore", "state: {enabled: false}\ntools:\n  echo: {enabled: true}\n"+o.pprofConfig(), pinned)
	if err != nil {
		return err
	}
	defer off.stop()
	offIdle := off.rss()
	ext, stopNATS, err := startOwnNATS(o, bin, dir, pinned)
	if err != nil {
		return err
	}
	defer stopNATS()
	defer ext.stop()
	servers := []*server{off, on, ext}
	profiles := []string{o.profile + ".off", o.profile, o.profile + ".nats"}
	cpu := make([]time.Duration, len(servers))
	total, err := compareAround(o, "Executions and the state store: sync echo, store off and on", []target{
		{"store off (state.enabled: false)", off.addr, request(off.addr, "/tools/echo/execute", echoBody), restOK},
		{"store on (embedded; events + audit)", on.addr, request(on.addr, "/tools/echo/execute", echoBody), restOK},
		{"store on, a NATS server of its own (on the generator's core)", ext.addr, request(ext.addr, "/tools/echo/execute", echoBody), restOK},
	}, func(i, round int) func() {
		if round == 0 && o.profile != "" {
			go saveProfile(servers[i].admin, o.round, profiles[i])
		}
		c0 := servers[i].cpu()
		return func() { cpu[i] += servers[i].cpu() - c0 }
	})
	if err != nil {
		return err
	}
	offS, onS := total[0], total[1]
	perCPU := func(i int) float64 { return float64(total[i].n) / cpu[i].Seconds() }
	fmt.Printf("\nstore on / off throughput: %.1f%% (target >= 95%%); calls per CPU-second of toold: off %.0f, on %.0f (%.1f%%)\n",
		100*onS.rate()/offS.rate(), perCPU(0), perCPU(1), 100*perCPU(1)/perCPU(0))
	fmt.Printf("store on with a NATS server of its own: calls per CPU-second of toold %.0f (%.1f%% of off); its req/s (%.1f%% of off) is\n"+
		"  held back by its NATS server sharing the generator's core, so read the CPU figure\n",
		perCPU(2), 100*perCPU(2)/perCPU(0), 100*total[2].rate()/offS.rate())

	clustered, stopCluster, err := startCluster(o, bin, dir, "cluster", pinned)
	if err != nil {
		return err
	}
	defer stopCluster()
	defer clustered.stop()
	for _, t := range []struct {
		name string
		td   *server
	}{{"embedded store", on}, {"three-node NATS cluster (streams with 3 replicas)", clustered}} {
		for _, conns := range []int{1, 8} {
			if err := asyncLatency(t.name, t.td, conns); err != nil {
				return err
			}
		}
	}
	if err := manyAsync(on, 10_000); err != nil {
		return err
	}
	if err := batchVsSequential(on); err != nil {
		return err
	}
	const mib = 1 << 20
	fmt.Printf("\nidle RSS: store on (embedded NATS) %.1f MiB, store off %.1f MiB (target < 40 MiB with the store)\n",
		float64(onIdle)/mib, float64(offIdle)/mib)
	return nil
}

// asyncLatency compares, at conns connections, a sync echo with an async
// one (submit, then GET ?wait until the end), and with the one-request
// form, on one toold, one after the other.
func asyncLatency(store string, td *server, conns int) error {
	const d = 3 * time.Second
	f, err := asyncForms(td, conns, d)
	if err != nil {
		return err
	}
	fmt.Printf("\nasync submit-to-result, %s, %d connection(s), %v each:\n\n", store, conns, d)
	fmt.Println("| call | per second | p50 | p99 | bad |")
	fmt.Println("|---|---|---|---|---|")
	for _, r := range []struct {
		name string
		s    *stats
	}{{"sync POST /tools/echo/execute", f.sync}, {"async: submit (202), then GET ?wait=10s", f.twoStep},
		{"async in one request: Prefer: respond-async, wait=10", f.oneStep}} {
		fmt.Printf("| %s | %.0f | %v | %v | %d |\n", r.name, r.s.rate(), pct(r.s.lat, .5).Round(time.Microsecond), pct(r.s.lat, .99).Round(time.Microsecond), r.s.errs)
	}
	fmt.Printf("\nasync/sync p50, %s, %d connection(s): %.2fx one request (target <= 2x), %.2fx submit then GET ?wait (target <= 3x)\n",
		store, conns, float64(pct(f.oneStep.lat, .5))/float64(pct(f.sync.lat, .5)), float64(pct(f.twoStep.lat, .5))/float64(pct(f.sync.lat, .5)))
	return nil
}

// forms are the three ways asyncLatency calls echo, each measured.
type forms struct{ sync, twoStep, oneStep *stats }

// asyncForms runs, for d each at conns connections: a sync echo; submit
// (202) then GET ?wait until the end; the one-request form.
func asyncForms(td *server, conns int, d time.Duration) (*forms, error) {
	sync, err := closedLoop(td.addr, request(td.addr, "/tools/echo/execute", echoBody), conns, d, restOK)
	if err != nil {
		return nil, err
	}
	submit := requestWith("POST", td.addr, "/tools/echo/execute", echoBody, "Prefer: respond-async")
	twoStep, err := loop(td.addr, conns, d, func(c *conn, end time.Time) (bool, error) {
		rep, err := c.do(submit, end.Add(10*time.Second))
		if err != nil || rep.status != 202 || rep.location == "" {
			return false, nil
		}
		rep, err = c.do(requestWith("GET", td.addr, rep.location+"?wait=10s", nil), end.Add(10*time.Second))
		return err == nil && restOK(rep), nil
	})
	if err != nil {
		return nil, err
	}
	waitForm := requestWith("POST", td.addr, "/tools/echo/execute", echoBody, "Prefer: respond-async, wait=10")
	oneStep, err := closedLoop(td.addr, waitForm, conns, d, restOK)
	if err != nil {
		return nil, err
	}
	return &forms{sync, twoStep, oneStep}, nil
}

// manyAsync submits n async echo executions from 32 connections, then
// reads every one to its end: none may be lost.
func manyAsync(td *server, n int) error {
	const conns = 32
	submit := requestWith("POST", td.addr, "/tools/echo/execute", echoBody, "Prefer: respond-async")
	locs := make([]string, n)
	var refused atomic.Int64
	start := time.Now()
	err := spread(td.addr, conns, n, func(c *conn, i int) {
		rep, err := c.do(submit, time.Now().Add(30*time.Second))
		if err != nil || rep.status != 202 {
			refused.Add(1)
			return
		}
		locs[i] = rep.location
	})
	if err != nil {
		return err
	}
	submitted := time.Since(start)
	var succeeded, failed, unfinished atomic.Int64
	err = spread(td.addr, conns, n, func(c *conn, i int) {
		if locs[i] == "" {
			return
		}
		rep, err := c.do(requestWith("GET", td.addr, locs[i]+"?wait=60s", nil), time.Now().Add(90*time.Second))
		switch {
		case err != nil || rep.status != 200:
			unfinished.Add(1)
		case bytes.Contains(rep.body, []byte(`"status":"success"`)):
			succeeded.Add(1)
		case bytes.Contains(rep.body, []byte(`"status":"pending"`)), bytes.Contains(rep.body, []byte(`"status":"running"`)):
			unfinished.Add(1)
		default:
			failed.Add(1)
		}
	})
	if err != nil {
		return err
	}
	accepted := int64(n) - refused.Load()
	fmt.Printf("\n%d async echo executions from %d connections: %d accepted in %v (%.0f/s), all ended after %v: %d success, %d other outcome, %d lost (accepted, never ended)\n",
		n, conns, accepted, submitted.Round(time.Millisecond), float64(accepted)/submitted.Seconds(), time.Since(start).Round(time.Millisecond),
		succeeded.Load(), failed.Load(), unfinished.Load())
	return nil
}

// spread calls f for 0..n-1 from conns connections, each taking the next
// index until none is left.
func spread(addr string, conns, n int, f func(c *conn, i int)) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range conns {
		c, err := dial(addr)
		if err != nil {
			next.Store(int64(n)) // the others stop at their next index
			wg.Wait()
			return err
		}
		wg.Go(func() {
			defer c.close()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				f(c, i)
			}
		})
	}
	wg.Wait()
	return nil
}

// batchVsSequential times one batch of 16 echo calls against 16
// sequential calls, on one connection, alternating.
func batchVsSequential(td *server) error {
	var calls bytes.Buffer
	calls.WriteString(`{"calls":[`)
	for i := range 16 {
		if i > 0 {
			calls.WriteByte(',')
		}
		fmt.Fprintf(&calls, `{"tool":"echo","arguments":%s}`, echoBody)
	}
	calls.WriteString(`]}`)
	batch := request(td.addr, "/batch", calls.Bytes())
	one := request(td.addr, "/tools/echo/execute", echoBody)
	c, err := dial(td.addr)
	if err != nil {
		return err
	}
	defer c.close()
	var batchT, seqT time.Duration
	var batches, seqs int
	for range 3 {
		end := time.Now().Add(time.Second)
		for time.Now().Before(end) {
			t0 := time.Now()
			rep, err := c.do(batch, end.Add(10*time.Second))
			if err != nil || rep.status != 200 || !bytes.Contains(rep.body, []byte(`"success_count":16`)) {
				return fmt.Errorf("batch: %v %d %.200s", err, rep.status, rep.body)
			}
			batchT += time.Since(t0)
			batches++
		}
		end = time.Now().Add(time.Second)
		for time.Now().Before(end) {
			t0 := time.Now()
			for range 16 {
				if rep, err := c.do(one, end.Add(10*time.Second)); err != nil || rep.status != 200 {
					return fmt.Errorf("sequential: %v %d", err, rep.status)
				}
			}
			seqT += time.Since(t0)
			seqs++
		}
	}
	b, s := batchT/time.Duration(batches), seqT/time.Duration(seqs)
	fmt.Printf("\na batch of 16 echo calls: %v; 16 sequential calls: %v; batch/sequential %.2fx (target < 2x)\n",
		b.Round(time.Microsecond), s.Round(time.Microsecond), float64(b)/float64(s))
	return nil
}

// saveProfile writes a CPU profile of d from a toold's admin listener.
func saveProfile(admin string, d time.Duration, file string) {
	resp, err := http.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", admin, int(d.Seconds())))
	if err != nil {
		fmt.Println("profile:", err)
		return
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if err := os.WriteFile(file, data, 0o644); err != nil {
		fmt.Println("profile:", err)
	}
}

// startCluster starts a three-node nats-server cluster (statetest's, the
// module toold embeds) and a toold whose store is that cluster, every
// stream with three replicas: async calls' writes are replicated there.
func startCluster(o options, bin, dir, name string, pinned bool) (*server, func(), error) {
	nodes, err := statetest.NewCluster(filepath.Join(dir, name), 3)
	if err != nil {
		return nil, nil, err
	}
	stop := func() {
		for _, n := range nodes {
			n.Kill()
		}
	}
	if err := statetest.StartAll(nodes); err == nil {
		err = statetest.WaitForJetStream(statetest.ClusterURL(nodes), 30*time.Second)
	}
	if err != nil {
		stop()
		return nil, nil, err
	}
	key := filepath.Join(dir, name+"-audit.key")
	if out, err := exec.Command(bin, "audit", "keygen", "-o", key).CombinedOutput(); err != nil {
		stop()
		return nil, nil, fmt.Errorf("toold audit keygen: %v: %s", err, out)
	}
	cfg := fmt.Sprintf("state: {nats: {url: %q, replicas: 3}, audit: {signing_key_file: %q}}\ntools:\n  echo: {enabled: true}\n",
		statetest.ClusterURL(nodes), key)
	td, err := startToold(bin, dir, name, cfg+o.pprofConfig(), pinned)
	if err != nil {
		stop()
		return nil, nil, err
	}
	td.nats = statetest.ClusterURL(nodes)
	return td, stop, nil
}

// rawPublish times n publishes of 600 bytes, one after another, from the
// generator to a file stream of three replicas made for it on the
// cluster at url: what one replicated write costs there, without toold.
func rawPublish(url string, n int) (time.Duration, error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const name = "bench_raw_publish"
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name}, Replicas: 3,
		Storage: jetstream.FileStorage}); err != nil {
		return 0, err
	}
	defer func() { _ = js.DeleteStream(ctx, name) }()
	data := make([]byte, 600)
	lat := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		if _, err := js.Publish(ctx, name, data); err != nil {
			return 0, err
		}
		lat = append(lat, time.Since(t0))
	}
	return pct(lat, .5), nil
}

// startOwnNATS starts a nats-server (built from the module toold uses, as
// the multi-replica tests build it) on the generator's core, and a toold
// whose state store is that server (state.nats.url): the store's cost to
// toold without the NATS server's own work on toold's core.
func startOwnNATS(o options, bin, dir string, pinned bool) (*server, func(), error) {
	natsBin, err := statetest.ServerBinary()
	if err != nil {
		return nil, nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	_ = l.Close()
	args := []string{natsBin, "-a", "127.0.0.1", "-p", port, "-js", "-sd", filepath.Join(dir, "nats-own")}
	if pinned {
		args = append([]string{"taskset", "-c", "1"}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	if err := statetest.StartReady(cmd); err != nil {
		_ = cmd.Process.Kill()
		return nil, nil, fmt.Errorf("nats-server: %w", err)
	}
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	// A shared store's audit log is signed with a key every replica holds.
	key := filepath.Join(dir, "audit.key")
	if out, err := exec.Command(bin, "audit", "keygen", "-o", key).CombinedOutput(); err != nil {
		stop()
		return nil, nil, fmt.Errorf("toold audit keygen: %v: %s", err, out)
	}
	cfg := fmt.Sprintf("state: {nats: {url: %q}, audit: {signing_key_file: %q}}\ntools:\n  echo: {enabled: true}\n", "nats://127.0.0.1:"+port, key)
	td, err := startToold(bin, dir, "ownnats", cfg+o.pprofConfig(), pinned)
	if err != nil {
		stop()
		return nil, nil, err
	}
	return td, stop, nil
}
