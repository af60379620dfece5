package launch

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toold/toold/internal/egress"
	"github.com/toold/toold/internal/egress/egresstest"
)

// BenchmarkEgress: the cost of toold's egress proxy, side by side with a
// run that dials the same server directly (network: true), in each
// containment mode. request/* time HTTPS requests inside one run (curl's
// own time_total per request, summed: the run's start is not in it), each
// on a new connection (the server closes it) or on one kept alive;
// run/* time whole runs of one request each (the proxy's set-up, the
// bundle and, for bwrap, the helper included).
//
//	go test ./internal/launch/ -run '^$' -bench Egress -benchtime 200x
func BenchmarkEgress(b *testing.B) {
	if _, err := exec.LookPath("curl"); err != nil {
		b.Skip("SKIPPED: curl is not installed (apt-get install curl)")
	}
	ca := egresstest.NewCA(b)
	srv := ca.Server(b, "api.test", "open.test")
	port := strconv.Itoa(srv.Port)
	cfg := Config{Egress: egress.Options{Resolver: egresstest.Resolver(map[string]string{"api.test": "127.0.0.1", "open.test": "127.0.0.1"})}}
	allow := egress.Policy{Allow: []string{"api.test:" + port, "open.test:" + port, "127.0.0.1:" + port}, CAFiles: []string{ca.File}}
	inject := allow
	inject.Inject = []egress.Inject{{Host: "api.test", Header: "Authorization", Value: "Bearer " + egressSecret}}
	// The direct run trusts what the proxied ones do: the system's roots
	// and the test's CA, one file (OpenSSL reading some 150 roots is most
	// of a new connection's cost on either side).
	caDir := b.TempDir()
	_ = os.Chmod(caDir, 0o755)
	system, _ := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	bundle := filepath.Join(caDir, "bundle.pem")
	if err := os.WriteFile(bundle, append(append(system, '\n'), ca.PEM...), 0o644); err != nil {
		b.Fatal(err)
	}
	// direct trusts the bundle above by --cacert; the others the run's
	// bundle (CURL_CA_BUNDLE: the system's roots, ca_files, the run's CA).
	ways := []struct {
		name string
		sb   Sandbox
		url  string
		ca   []string
	}{
		{"direct", Sandbox{Network: NetworkOn(), ReadOnlyPaths: []string{caDir}}, "https://127.0.0.1:" + port + "/", []string{"--cacert", bundle}},
		{"tunnel", Sandbox{Network: AllowList(allow)}, "https://open.test:" + port + "/", nil},
		{"inject", Sandbox{Network: AllowList(inject)}, "https://api.test:" + port + "/", nil},
	}
	for _, mode := range []Mode{ModeNamespaces, ModeBwrap} {
		l := testLauncher(b, mode, cfg)
		for _, w := range ways {
			r, err := l.Runner(w.sb)
			if err != nil {
				skipUnavailable(b, err)
				b.Fatal(err)
			}
			for _, keep := range []bool{false, true} {
				name := "request/" + string(mode) + "/" + w.name + "/new-connection"
				if keep {
					name = "request/" + string(mode) + "/" + w.name + "/kept-alive"
				}
				b.Run(name, func(b *testing.B) { benchRequests(b, r, l.Workspace(), w.url, w.ca, keep) })
			}
			b.Run("run/"+string(mode)+"/"+w.name, func(b *testing.B) {
				for b.Loop() {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					res, err := r.Run(ctx, RunSpec{Argv: append(append([]string{"curl", "-sS", "-o", "/dev/null"}, w.ca...), w.url)})
					cancel()
					if err != nil || !res.OK {
						b.Fatalf("%v %+v", err, res)
					}
				}
			})
		}
	}
}

// benchRequests makes b.N requests to url in one run of curl and reports
// the mean of curl's time_total per request.
func benchRequests(b *testing.B, r *Runner, ws, url string, ca []string, keep bool) {
	var cfg strings.Builder
	if !keep {
		cfg.WriteString("header = \"Connection: close\"\n")
	}
	for range b.N {
		fmt.Fprintf(&cfg, "url = %q\noutput = \"/dev/null\"\nwrite-out = \"%%{time_total}\\n\"\n", url)
	}
	f := filepath.Join(ws, "bench-"+strconv.Itoa(b.N)+".curl")
	if err := os.WriteFile(f, []byte(cfg.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	defer os.Remove(f)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b.ResetTimer()
	res, err := r.Run(ctx, RunSpec{Argv: append(append([]string{"curl", "-sS"}, ca...), "-K", f)})
	b.StopTimer()
	if err != nil || !res.OK {
		b.Fatalf("%v %+v", err, res)
	}
	var total float64
	n := 0
	for line := range strings.Lines(res.Stdout) {
		if v, err := strconv.ParseFloat(strings.TrimSpace(line), 64); err == nil {
			total += v
			n++
		}
	}
	if n != b.N {
		b.Fatalf("%d timings for %d requests:\n%s", n, b.N, res.Stderr)
	}
	b.ReportMetric(total/float64(n)*1e6, "µs/request")
	b.ReportMetric(0, "ns/op")
}
