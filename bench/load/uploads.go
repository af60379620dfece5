package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// uploads measures what stalled uploads cost toold (issue 16, finding 3):
// n clients each send the headers of a POST announcing a body of size
// bytes, then the body but its last byte, and stall. Before admission came
// before the body and bodies shared a budget, each such upload held up to
// max_body_bytes: 60 of them added 68 MiB. Now a call to a tool is
// admitted (or refused) before its large body is read, every body held
// counts against server.body_budget_bytes, and a body that stops arriving
// is cut at server.body_read_timeout.
//
// It runs once per route — a tool's execute (admission first), /mcp (the
// byte budget alone: the tool is named in the body) — each on a fresh
// toold, and reports the RSS growth (peak while the uploads stall, over
// the idle RSS just before) and how the uploads were answered.
func uploads(o options, bin, dir string, pinned bool) error {
	fmt.Printf("\n## Stalled uploads: %d clients, each announcing %d KiB and stalling before the last byte\n\n", o.uploads, o.uploadBytes>>10)
	fmt.Println("| route | RSS idle | RSS peak | growth | 429 | 503 | 408 | 504 | other | held at the end |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	for i, rt := range []struct{ name, path string }{
		{"POST /tools/echo/execute", "/tools/echo/execute"},
		{"POST /mcp", "/mcp"},
	} {
		td, err := startToold(bin, dir, fmt.Sprint("uploads-", i), "tools:\n  echo: {enabled: true}\n", pinned)
		if err != nil {
			return err
		}
		r, err := stallUploads(o, td, rt.path)
		td.stop()
		if err != nil {
			return err
		}
		const mib = 1 << 20
		fmt.Printf("| %s | %.1f MiB | %.1f MiB | %+.1f MiB | %d | %d | %d | %d | %d | %d |\n", rt.name, float64(r.idle)/mib,
			float64(r.peak)/mib, float64(r.peak-r.idle)/mib, r.status[429], r.status[503], r.status[408], r.status[504], r.other, r.held)
	}
	fmt.Println("\ntarget: growth < 16 MiB; every upload answered: 429 or 503 at once (tool full, budget spent), 408 at the read\n" +
		"deadline (min of body_read_timeout and the tool's timeout), 503/504 for those queued past their wait")
	return nil
}

type uploadResult struct {
	idle, peak  int64
	status      map[int]int
	other, held int
}

// stallUploads opens the uploads, holds them for a while polling toold's
// RSS, and reads whatever each was answered.
func stallUploads(o options, td *server, path string) (*uploadResult, error) {
	res := &uploadResult{idle: td.rss(), status: map[int]int{}}
	res.peak = res.idle
	stop := make(chan struct{})
	var pollDone sync.WaitGroup
	pollDone.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				res.peak = max(res.peak, td.rss())
			}
		}
	})
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"+
		"Content-Length: %d\r\n\r\n", path, td.addr, o.uploadBytes)
	body := []byte(`{"message":"` + strings.Repeat("a", o.uploadBytes))[:o.uploadBytes-1]
	conns := make([]net.Conn, o.uploads)
	var wg sync.WaitGroup
	var dialErrs atomic.Int64
	dials := make(chan struct{}, 64) // the kernel's accept queue is finite: dial a few at a time
	for i := range conns {
		wg.Go(func() {
			dials <- struct{}{}
			c, err := net.DialTimeout("tcp", td.addr, 10*time.Second)
			<-dials
			if err != nil {
				dialErrs.Add(1)
				return
			}
			conns[i] = c
			// A server that does not read fills the socket's buffers: the
			// write stalls, and so does the client, as intended.
			_ = c.SetWriteDeadline(time.Now().Add(2 * time.Second))
			_, _ = c.Write([]byte(head))
			_, _ = c.Write(body)
		})
	}
	wg.Wait()
	time.Sleep(o.uploadHold) // stalled, while toold decides and the RSS is polled
	close(stop)
	pollDone.Wait()
	for _, c := range conns {
		if c == nil {
			continue
		}
		_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		switch {
		case err != nil:
			res.held++
		case resp.StatusCode == 429 || resp.StatusCode == 503 || resp.StatusCode == 408 || resp.StatusCode == 504:
			res.status[resp.StatusCode]++
		default:
			res.other++
		}
		c.Close()
	}
	if n := dialErrs.Load(); n > 0 {
		return nil, fmt.Errorf("%d uploads could not connect", n)
	}
	return res, nil
}
