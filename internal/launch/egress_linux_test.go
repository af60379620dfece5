package launch

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toold/toold/internal/egress"
	"github.com/toold/toold/internal/egress/egresstest"
	"github.com/toold/toold/internal/launch/launchtest"
	"github.com/toold/toold/internal/testpeer"
)

// egressSecret is what the allow-list injects for api.test: no program
// may see it.
const egressSecret = "ghp_egressTestSecret0123456789abcdef"

// egressWorld is the outside a test's runs reach: one TLS server of the
// test's own CA on loopback, known as api.test (a header injected),
// open.test (tunnelled), evil.test (not allowed) and inside.test (allowed
// by name, its loopback address not listed for its port); and git's
// smart HTTP on it.
type egressWorld struct {
	ca     *egresstest.CA
	srv    *egresstest.Server
	other  *egresstest.Server // inside.test's port
	port   string
	commit string
	cfg    Config
	policy egress.Policy
	reg    *prometheus.Registry
}

func newEgressWorld(t *testing.T) *egressWorld {
	t.Helper()
	ca := egresstest.NewCA(t)
	w := &egressWorld{ca: ca, srv: ca.Server(t, "api.test", "open.test", "evil.test"), other: ca.Server(t, "inside.test"),
		reg: prometheus.NewRegistry()}
	w.commit = w.srv.Git(t)
	w.port = strconv.Itoa(w.srv.Port)
	names := map[string]string{"api.test": "127.0.0.1", "open.test": "127.0.0.1", "evil.test": "127.0.0.1", "inside.test": "127.0.0.1"}
	w.cfg = Config{Egress: egress.Options{Metrics: egress.NewMetrics(w.reg), Resolver: egresstest.Resolver(names)}}
	w.policy = egress.Policy{
		Allow: []string{"api.test:" + w.port, "open.test:" + w.port, "127.0.0.1:" + w.port,
			"inside.test:" + strconv.Itoa(w.other.Port)},
		Inject:  []egress.Inject{{Host: "api.test", Header: "Authorization", Value: "Bearer " + egressSecret}},
		CAFiles: []string{ca.File},
	}
	return w
}

// url is https://host:port/path on the world's server.
func (w *egressWorld) url(host, path string) string {
	return "https://" + host + ":" + w.port + path
}

// egressClient is a real program making one HTTPS request: through the
// proxy as its variables say, or directly, ignoring them.
type egressClient struct {
	name    string
	program string
	via     func(url string) []string
	direct  func(url string) []string
	paths   []string // read_only_paths it needs
}

const pyGet = `import sys, urllib.request, urllib.error
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=20).read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode()); sys.exit(1)
`

const pyDirect = `import sys, urllib.request
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
print(opener.open(sys.argv[1], timeout=20).read().decode())
`

// nodeGet is Node 20's fetch: it reads no proxy variables itself, so the
// program sets undici's EnvHttpProxyAgent as fetch's dispatcher, as a
// Node 20 program meant to honour HTTPS_PROXY does.
const nodeGet = `const {EnvHttpProxyAgent, setGlobalDispatcher} = require(process.argv[1]);
setGlobalDispatcher(new EnvHttpProxyAgent());
fetch(process.argv[2]).then(async r => { console.log(r.status, await r.text()); process.exit(r.ok ? 0 : 1) })
  .catch(e => { for (let c = e; c; c = c.cause) console.error(String(c)); process.exit(1) })`

const nodeDirect = `fetch(process.argv[1]).then(async r => console.log(r.status, await r.text()))
  .catch(e => { for (let c = e; c; c = c.cause) console.error(String(c)); process.exit(1) })`

// egressClients are the programs of the proof; one that is not installed
// is skipped, saying how to install it (a failure with
// TOOLD_REQUIRE_SANDBOX=1 or, for node's undici, TOOLD_REQUIRE_NPM=1).
func egressClients(t *testing.T) []egressClient {
	// From this file, not the working directory: the unprivileged re-run
	// runs a copy of the binary elsewhere.
	_, here, _, _ := runtime.Caller(0)
	undici := filepath.Join(filepath.Dir(here), "../../test/egress/node_modules/undici")
	noProxy := []string{"env", "-u", "https_proxy", "-u", "HTTPS_PROXY", "-u", "http_proxy", "-u", "HTTP_PROXY", "-u", "all_proxy", "-u", "ALL_PROXY"}
	return []egressClient{
		{name: "curl", program: "curl",
			via:    func(u string) []string { return []string{"curl", "-sS", "--fail-with-body", "--max-time", "20", u} },
			direct: func(u string) []string { return []string{"curl", "-sS", "--noproxy", "*", "--max-time", "20", u} }},
		{name: "git", program: "git",
			via:    func(u string) []string { return []string{"git", "ls-remote", origin(u) + "/repo.git"} },
			direct: func(u string) []string { return append(noProxy, "git", "ls-remote", origin(u)+"/repo.git") }},
		{name: "python3", program: "python3",
			via:    func(u string) []string { return []string{"python3", "-c", pyGet, u} },
			direct: func(u string) []string { return []string{"python3", "-c", pyDirect, u} }},
		{name: "node", program: "node", paths: []string{undici},
			via:    func(u string) []string { return []string{"node", "-e", nodeGet, undici, u} },
			direct: func(u string) []string { return []string{"node", "-e", nodeDirect, u} }},
	}
}

// origin is u's scheme and host: git's URL is the repository's.
func origin(u string) string {
	i := strings.Index(u, "://")
	if j := strings.IndexByte(u[i+3:], '/'); j >= 0 {
		return u[:i+3+j]
	}
	return u
}

// needClient skips (or fails where required) when c cannot run here.
func needClient(t *testing.T, c egressClient) {
	t.Helper()
	if _, err := exec.LookPath(c.program); err != nil {
		launchtest.Unavailable(t, "SKIPPED: %s is not installed (.ci/run installs it: apt-get install %s)", c.program, c.program)
	}
	for _, p := range c.paths {
		if _, err := os.Stat(p); err != nil {
			testpeer.Missing(t, "TOOLD_REQUIRE_NPM", "undici for node's fetch is not installed: npm ci --prefix test/egress")
		}
	}
}

// runIn runs argv in r, bounded.
func runIn(t *testing.T, r *Runner, argv ...string) *Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := r.Run(ctx, RunSpec{Argv: argv, Net: RunNet{Tool: "egress-test"}})
	if err != nil {
		t.Fatalf("%v: %v", argv[:min(len(argv), 2)], err)
	}
	t.Logf("%s: %.0f ms", argv[0], res.DurationMS)
	return res
}

// egressRunner is a runner of the world's allow-list in mode.
func (w *egressWorld) runner(t *testing.T, mode Mode, paths ...string) *Runner {
	t.Helper()
	l := testLauncher(t, mode, w.cfg)
	r, err := l.Runner(Sandbox{Network: AllowList(w.policy), ReadOnlyPaths: paths})
	if err != nil {
		skipUnavailable(t, err)
		t.Fatal(err)
	}
	return r
}

// TestEgressPrograms: curl, git, python's urllib and node's fetch inside
// each sandbox reach an allowed host through toold's proxy (a tunnel: the
// server's certificate checked by the program against the bundle, which
// holds ca_files), reach api.test with the header toold adds (the server
// sees the secret; the program, which gets its echo, sees it redacted),
// are refused evil.test with 403 naming the reason (and the result's
// network.refused says it), and reach nothing when they dial around the
// proxy.
func TestEgressPrograms(t *testing.T) {
	w := newEgressWorld(t)
	for _, mode := range []Mode{ModeNamespaces, ModeBwrap} {
		for _, c := range egressClients(t) {
			t.Run(string(mode)+"/"+c.name, func(t *testing.T) {
				needClient(t, c)
				r := w.runner(t, mode, c.paths...)
				tag := "/" + string(mode) + "-" + c.name

				res := runIn(t, r, c.via(w.url("open.test", tag+"/open"))...)
				want := `"path":"` + tag + `/open"`
				if c.name == "git" {
					want = w.commit
				}
				if !res.OK || !strings.Contains(res.Stdout, want) {
					t.Fatalf("allowed host: ok %v\nstdout %s\nstderr %s", res.OK, res.Stdout, res.Stderr)
				}

				before := len(w.srv.Seen())
				res = runIn(t, r, c.via(w.url("api.test", tag+"/inject"))...)
				if !res.OK || strings.Contains(res.Stdout+res.Stderr, egressSecret) {
					t.Fatalf("inject host: ok %v\nstdout %s\nstderr %s", res.OK, res.Stdout, res.Stderr)
				}
				if c.name != "git" && !strings.Contains(res.Stdout, egress.Redacted) {
					t.Errorf("the server's echo of the header is not redacted:\n%s", res.Stdout)
				}
				seen := w.srv.Seen()[before:]
				if len(seen) == 0 || seen[0].Header.Get("Authorization") != "Bearer "+egressSecret {
					t.Errorf("the server did not get the injected header: %+v", seen)
				}

				res = runIn(t, r, c.via(w.url("evil.test", tag+"/evil"))...)
				if res.OK || !strings.Contains(res.Stdout+res.Stderr, "403") {
					t.Errorf("refused host: ok %v\nstdout %s\nstderr %s", res.OK, res.Stdout, res.Stderr)
				}
				if res.Network == nil || len(res.Network.Refused) != 1 || res.Network.Refused[0] !=
					(egress.Refusal{Host: "evil.test", Port: w.srv.Port, Reason: egress.ReasonNotAllowed, Count: res.Network.Refused[0].Count}) {
					t.Errorf("network.refused: %+v", res.Network)
				}

				res = runIn(t, r, c.direct(w.url("127.0.0.1", tag+"/direct"))...)
				if res.OK {
					t.Errorf("a direct dial around the proxy reached the server:\n%s", res.Stdout)
				}
				for _, s := range w.srv.Seen() {
					if strings.HasSuffix(s.Path, "/direct") {
						t.Errorf("the server saw %s", s.Path)
					}
				}
			})
		}
	}
}

// TestEgressSecretNowhere: a run of an inject allow-list has the proxy
// and the bundle in its environment, and the secret nowhere it can look:
// not in env, /proc/self/environ, its arguments, /tmp, $HOME or the
// bundle.
func TestEgressSecretNowhere(t *testing.T) {
	w := newEgressWorld(t)
	script := `env; echo ---; tr '\0' '\n' </proc/self/environ; echo ---; cat /proc/self/cmdline; echo ---
find /tmp "$HOME" -type f -exec cat {} + 2>&1; echo ---; cat "$SSL_CERT_FILE"`
	for _, mode := range []Mode{ModeNamespaces, ModeBwrap} {
		t.Run(string(mode), func(t *testing.T) {
			res := runIn(t, w.runner(t, mode), "/bin/sh", "-c", script)
			if !res.OK {
				t.Fatalf("%s\n%s", res.Stdout, res.Stderr)
			}
			out := res.Stdout + res.Stderr
			if strings.Contains(out, egressSecret) || strings.Contains(out, egressSecret[4:20]) || strings.Contains(out, "PRIVATE KEY") {
				t.Fatalf("the secret is visible to the run:\n%s", out)
			}
			for _, want := range []string{"HTTPS_PROXY=http://127.0.0.1:", "https_proxy=http://127.0.0.1:", "NO_PROXY=localhost",
				"SSL_CERT_FILE=", "NODE_EXTRA_CA_CERTS=", "GIT_SSL_CAINFO=", "REQUESTS_CA_BUNDLE=", "CURL_CA_BUNDLE=",
				"toold egress proxy", "BEGIN CERTIFICATE"} {
				if !strings.Contains(out, want) && !(want == "toold egress proxy" && strings.Contains(out, "BEGIN CERTIFICATE")) {
					t.Errorf("the run lacks %q:\n%.2000s", want, out)
				}
			}
		})
	}
}

// TestEgressRefusals: an allowed name whose address is loopback but not
// listed for its port is refused (toold resolved it; the run could not
// have), a port the entry does not name is refused, and the refusals are
// counted per tool.
func TestEgressRefusals(t *testing.T) {
	w := newEgressWorld(t)
	if _, err := exec.LookPath("curl"); err != nil {
		launchtest.Unavailable(t, "SKIPPED: curl is not installed (apt-get install curl)")
	}
	for _, mode := range []Mode{ModeNamespaces, ModeBwrap} {
		t.Run(string(mode), func(t *testing.T) {
			r := w.runner(t, mode)
			res := runIn(t, r, "/bin/sh", "-c", fmt.Sprintf(
				"curl -sS https://inside.test:%d/ ; curl -sS https://open.test:1/ ; curl -sS https://api.test:%s/ -o /dev/null -w '%%{http_code}'",
				w.other.Port, w.port))
			got := map[string]string{}
			for _, f := range res.Network.Refused {
				got[f.Host+":"+strconv.Itoa(f.Port)] = f.Reason
			}
			want := map[string]string{"inside.test:" + strconv.Itoa(w.other.Port): egress.ReasonPrivateAddress, "open.test:1": egress.ReasonPort}
			if fmt.Sprint(got) != fmt.Sprint(want) || !strings.HasSuffix(res.Stdout, "200") || res.Network.Connections != 2 {
				t.Errorf("refused %v, want %v; stdout %q; report %+v", got, want, res.Stdout, res.Network)
			}
		})
	}
	n := 0.0
	mfs, _ := w.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "toold_egress_refused_total" {
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	if n < 2 {
		t.Errorf("toold_egress_refused_total{tool=\"egress-test\"} = %v", n)
	}
}

// bypass tries every way around the proxy a program has: a raw IP
// socket, a packet socket, UDP (a DNS query to a public resolver, and to
// the host's loopback), TCP to the server's address and to an IPv6 one,
// MPTCP, and the system's resolver for an allowed name. Each line says
// what happened.
const bypass = `import socket, sys
port = int(sys.argv[1])
def attempt(name, f):
    try:
        f(); print(name, "REACHED")
    except Exception as e:
        print(name, "refused:", type(e).__name__, e)
def raw(): socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP).sendto(b"\x08\0\0\0\0\0\0\0", ("192.0.2.1", 0))
def packet(): socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
def udp(host):
    def f():
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)
        s.sendto(b"\0\1\1\0\0\1\0\0\0\0\0\0\3api\4test\0\0\1\0\1", (host, 53)); s.recv(512)
    return f
def tcp(family, addr, proto=0):
    def f():
        s = socket.socket(family, socket.SOCK_STREAM, proto); s.settimeout(5); s.connect(addr)
    return f
attempt("raw", raw)
attempt("packet", packet)
attempt("udp-public", udp("192.0.2.53"))
attempt("udp-loopback", udp("127.0.0.1"))
attempt("tcp", tcp(socket.AF_INET, ("127.0.0.1", port)))
attempt("tcp-public", tcp(socket.AF_INET, ("192.0.2.1", 443)))
attempt("tcp6", tcp(socket.AF_INET6, ("2001:db8::1", 443)))
attempt("tcp6-loopback", tcp(socket.AF_INET6, ("::1", port)))
attempt("mptcp", tcp(socket.AF_INET, ("127.0.0.1", port), 262))
attempt("dns", lambda: socket.getaddrinfo("api.test", 443))
`

// TestEgressNoWayAround: with an allow-list, the proxy is the only way
// out: raw and packet sockets, UDP, TCP and MPTCP to the server's address
// (toold's host's loopback is not the run's), IPv6, and a DNS lookup of
// its own all fail, in each mode.
func TestEgressNoWayAround(t *testing.T) {
	w := newEgressWorld(t)
	if _, err := exec.LookPath("python3"); err != nil {
		launchtest.Unavailable(t, "SKIPPED: python3 is not installed (apt-get install python3)")
	}
	for _, mode := range []Mode{ModeNamespaces, ModeBwrap} {
		t.Run(string(mode), func(t *testing.T) {
			res := runIn(t, w.runner(t, mode), "python3", "-c", bypass, w.port)
			lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
			if len(lines) != 10 {
				t.Fatalf("stdout %s\nstderr %s", res.Stdout, res.Stderr)
			}
			for _, l := range lines {
				if strings.Contains(l, "REACHED") {
					t.Errorf("a way around the proxy: %s", l)
				}
			}
			t.Logf("%s", res.Stdout)
			for _, s := range w.srv.Seen() {
				t.Errorf("the server was reached: %+v", s)
			}
		})
	}
}

// TestEgressProcess: a long-lived program (a stdio MCP server) with an
// allow-list reaches its host through a proxy that lives as long as it
// does and ends at Stop.
func TestEgressProcess(t *testing.T) {
	w := newEgressWorld(t)
	if _, err := exec.LookPath("curl"); err != nil {
		launchtest.Unavailable(t, "SKIPPED: curl is not installed (apt-get install curl)")
	}
	for _, mode := range []Mode{ModeNamespaces, ModeBwrap} {
		t.Run(string(mode), func(t *testing.T) {
			l := testLauncher(t, mode, w.cfg)
			p, err := l.Start(ProcessSpec{Name: "server", Sandbox: Sandbox{Network: AllowList(w.policy)},
				Argv: []string{"/bin/sh", "-c", "while read url; do curl -sS \"$url\" 2>&1 | tr -d '\\n'; echo; done"}})
			if err != nil {
				skipUnavailable(t, err)
				t.Fatal(err)
			}
			out := bufio.NewReader(p.Stdout)
			for _, path := range []string{"/one", "/two"} {
				fmt.Fprintln(p.Stdin, w.url("open.test", "/process-"+string(mode)+path))
				line, err := out.ReadString('\n')
				if err != nil || !strings.Contains(line, `"path":"/process-`+string(mode)+path+`"`) {
					t.Fatalf("%q %v (stderr %s)", line, err, p.Stderr())
				}
			}
			p.Stop(time.Second)
			if rep := p.net.close(); rep == nil || rep.Connections != 2 {
				t.Errorf("the proxy's report after Stop: %+v", rep)
			}
		})
	}
}
