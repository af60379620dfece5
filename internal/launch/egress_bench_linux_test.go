package launch

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toold/toold/internal/egress"
	"github.com/toold/toold/internal/egress/egresstest"
)

// BenchmarkEgress: the cost of toold's egress proxy inside a sandbox,
// side by side with a run that dials the same server directly
// (network: true), in each containment mode. Each iteration runs, for
// each way in turn (direct, tunnel, inject), curl making 10 HTTPS
// requests, each on a new connection (the server closes it), and takes
// curl's own time_total of each (the run's start is not in it), and the
// whole run's time (the proxy's set-up, the bundle and, for bwrap, the
// helper in it). Alternating the ways puts the machine's load on all of
// them alike; it reports each way's median and the proxied ways' ratios
// to direct.
//
//	go test ./internal/launch/ -run '^$' -bench Egress -benchtime 20x
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
	caDir, err := os.MkdirTemp("", "toold-egress-bench-") // the run-as uid reaches it (t.TempDir's parent is 0700)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(caDir) })
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
	const perRun = 10
	for _, mode := range []Mode{ModeNamespaces, ModeBwrap} {
		b.Run(string(mode), func(b *testing.B) {
			l := testLauncher(b, mode, cfg)
			runners := make([]*Runner, len(ways))
			argv := make([][]string, len(ways))
			for i, w := range ways {
				r, err := l.Runner(w.sb)
				if err != nil {
					skipUnavailable(b, err)
					b.Fatal(err)
				}
				runners[i] = r
				argv[i] = append([]string{"curl", "-sS", "-H", "Connection: close", "-w", "%{time_total}\\n"}, w.ca...)
				for range perRun {
					argv[i] = append(argv[i], "-o", "/dev/null", w.url)
				}
			}
			requests := make([][]time.Duration, len(ways))
			runs := make([][]time.Duration, len(ways))
			for b.Loop() {
				for i := range ways {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					start := time.Now()
					res, err := runners[i].Run(ctx, RunSpec{Argv: argv[i]})
					runs[i] = append(runs[i], time.Since(start))
					cancel()
					if err != nil || !res.OK {
						b.Fatalf("%s: %v %+v", ways[i].name, err, res)
					}
					n := 0
					for line := range strings.Lines(res.Stdout) {
						if v, err := strconv.ParseFloat(strings.TrimSpace(line), 64); err == nil {
							requests[i] = append(requests[i], time.Duration(v*float64(time.Second)))
							n++
						}
					}
					if n != perRun {
						b.Fatalf("%s: %d timings for %d requests:\n%s", ways[i].name, n, perRun, res.Stdout)
					}
				}
			}
			names := []string{"direct", "tunnel", "inject"}
			report(b, "request", names, requests)
			report(b, "run", names, runs)
			b.ReportMetric(0, "ns/op")
		})
	}
}

// report reports each way's median (µs) and each proxied way's median
// over direct's.
func report(b *testing.B, what string, names []string, took [][]time.Duration) {
	med := make([]float64, len(took))
	for i, t := range took {
		slices.Sort(t)
		med[i] = float64(t[len(t)/2].Microseconds())
		b.ReportMetric(med[i], what+"-"+names[i]+"-µs")
	}
	for i := 1; i < len(med); i++ {
		b.ReportMetric(med[i]/med[0], what+"-"+names[i]+"/direct")
	}
}
