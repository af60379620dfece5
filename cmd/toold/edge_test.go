package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rawConn is one client connection driven by hand, so a test decides
// exactly when it is idle, busy or silent.
type rawConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, base string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{c: c, r: bufio.NewReader(c)}
}

// send writes a request; the connection stays open (HTTP/1.1 keep-alive).
func (rc *rawConn) send(t *testing.T, method, path, body string) {
	t.Helper()
	req := method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n"
	if body != "" {
		req += "Content-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n"
	}
	if _, err := io.WriteString(rc.c, req+"\r\n"+body); err != nil {
		t.Fatal(err)
	}
}

// answer reads one response within d; nil when none came (or the
// connection broke).
func (rc *rawConn) answer(d time.Duration) (*http.Response, string) {
	rc.c.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(rc.r, nil)
	if err != nil {
		return nil, err.Error()
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// do is send and answer on a new connection.
func do(t *testing.T, base, method, path, body string, d time.Duration) (*http.Response, string) {
	t.Helper()
	rc := dialRaw(t, base)
	rc.send(t, method, path, body)
	return rc.answer(d)
}

// TestConnectionCapEvictsIdle: with max_connections reached by idle
// keep-alive clients, a new client is served (the longest idle connection
// makes room); with every connection busy, a new client gets a fast 503
// with Retry-After and Connection: close rather than a hang; silent
// connections are cut at read_header_timeout.
func TestConnectionCapEvictsIdle(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(cfg, []byte("server: {max_connections: 4, read_header_timeout: 1s}\ntools: {sleep: {enabled: true}}\n"), 0o644)
	in := start(t, nil, "-workspace", workspace(t), "-config", cfg)

	idle := make([]*rawConn, 4)
	for i := range idle {
		idle[i] = dialRaw(t, in.url)
		idle[i].send(t, "GET", "/healthz", "")
		if resp, msg := idle[i].answer(5 * time.Second); resp == nil || resp.StatusCode != 200 {
			t.Fatalf("idle client %d: %v %s", i, resp, msg)
		}
		// The client has its answer before the server files the
		// connection as idle; wait for the server, so the idle order is
		// the order of the clients.
		waitIdle(t, in.admin, i+1)
	}
	start := time.Now()
	resp, body := do(t, in.url, "GET", "/healthz", "", 5*time.Second)
	if resp == nil || resp.StatusCode != 200 {
		t.Fatalf("a fifth client behind four idle ones: %v %s after %v", resp, body, time.Since(start))
	}
	if _, msg := idle[0].answer(2 * time.Second); !strings.Contains(msg, "EOF") && !strings.Contains(msg, "reset") {
		t.Errorf("the longest idle connection was not the one closed: %s", msg)
	}
	// The fifth client idles too: four idle connections for the four
	// busy ones below to take the places of, once the server has filed it.
	waitIdle(t, in.admin, 4)

	// Four busy calls: a fifth client is refused at once.
	busy := make([]*rawConn, 4)
	for i := range busy {
		busy[i] = dialRaw(t, in.url)
		busy[i].send(t, "POST", "/tools/sleep/execute", `{"ms":3000}`)
	}
	in.waitMetric(t, `toold_tool_in_flight{tool="sleep"}`, func(v float64) bool { return v == 4 }, "the four sleeps running")
	start = time.Now()
	resp, body = do(t, in.url, "GET", "/healthz", "", 5*time.Second)
	if resp == nil || resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !resp.Close ||
		!strings.Contains(body, `"code":"connection_capacity"`) {
		t.Fatalf("a client over a cap of busy connections: %v %s after %v", resp, body, time.Since(start))
	}
	for i, b := range busy {
		if resp, msg := b.answer(10 * time.Second); resp == nil || resp.StatusCode != 200 {
			t.Errorf("busy call %d was disturbed: %v %s", i, resp, msg)
		}
	}
	for _, b := range busy {
		b.c.Close()
	}

	// Four silent connections: a fifth is served once they have been
	// silent for a second (server.SilentAfter), within read_header_timeout.
	for range 4 {
		dialRaw(t, in.url)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, _ = do(t, in.url, "GET", "/healthz", "", 5*time.Second)
		if resp != nil && resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("silent connections kept a newcomer out: %v", resp)
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, metrics := do(t, in.admin, "GET", "/metrics", "", 5*time.Second)
	for _, want := range []string{"toold_http_connections_max 4", "toold_http_connections_evicted_total", "toold_http_connections_refused_total"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// waitIdle waits (5 s at most) until the API listener counts n idle
// connections, as its metric says.
func waitIdle(t *testing.T, admin string, n int) {
	t.Helper()
	want := "toold_http_connections_idle " + strconv.Itoa(n) + "\n"
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, metrics := do(t, admin, "GET", "/metrics", "", 5*time.Second)
		if strings.Contains(metrics, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server never counted %d idle connections", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAdminChecksHostAndOrigin: the admin listener refuses a rebound name
// and a foreign Origin, as the API does, and serves loopback and address
// Hosts (Prometheus scrapes pods by address); pprof is off unless enabled.
func TestAdminChecksHostAndOrigin(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(cfg, []byte("server: {pprof: true}\n"), 0o644)
	off := start(t, nil, "-workspace", workspace(t))
	on := start(t, nil, "-workspace", workspace(t), "-config", cfg)
	if strings.Contains(off.stdout.String(), "pprof") || !strings.Contains(on.stdout.String(), "pprof on") {
		t.Errorf("the start-up lines do not say where pprof is: %q / %q", off.stdout, on.stdout)
	}
	get := func(base, path string, header map[string]string) int {
		req, _ := http.NewRequest("GET", base+path, nil)
		for k, v := range header {
			if k == "Host" {
				req.Host = v
			} else {
				req.Header.Set(k, v)
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	tests := []struct {
		name   string
		base   string
		path   string
		header map[string]string
		want   int
	}{
		{"metrics", off.admin, "/metrics", nil, 200},
		{"metrics as localhost", off.admin, "/metrics", map[string]string{"Host": "localhost:9090"}, 200},
		{"metrics by pod address", off.admin, "/metrics", map[string]string{"Host": "10.1.2.3:9090"}, 200},
		{"metrics by IPv6 address", off.admin, "/metrics", map[string]string{"Host": "[fd00::1]:9090"}, 200},
		{"metrics, rebound name", off.admin, "/metrics", map[string]string{"Host": "attacker.example:9090"}, 403},
		{"metrics, name of loopback", off.admin, "/metrics", map[string]string{"Host": "127.0.0.1.nip.io"}, 403},
		{"metrics, foreign origin", off.admin, "/metrics", map[string]string{"Origin": "https://attacker.example"}, 403},
		{"pprof off", off.admin, "/debug/pprof/", nil, 404},
		{"pprof on", on.admin, "/debug/pprof/", nil, 200},
		{"pprof, rebound name", on.admin, "/debug/pprof/cmdline", map[string]string{"Host": "attacker.example:9090"}, 403},
		{"pprof, foreign origin", on.admin, "/debug/pprof/", map[string]string{"Origin": "http://attacker.example"}, 403},
	}
	for _, tc := range tests {
		if got := get(tc.base, tc.path, tc.header); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}
