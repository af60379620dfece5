// Command load is toold's load harness. In one run, on loopback only and
// bounded in time, it measures:
//
//  1. throughput: a bare net/http JSON echo server and toold serving its
//     echo tool, driven alternately by the same generator at 64 keep-alive
//     connections; req/s, p50 and p99 of each, and the ratio;
//  2. overload: toold's sleep tool with 10 in flight and 100 queued,
//     sleeping 50 ms, hit by 500 concurrent clients; accepted, rejected,
//     lost (must be 0), the largest in-flight count observed (must be 10),
//     and the p99 of rejections and of accepted calls;
//  3. memory: toold's RSS idle, and with 1,000 callers queued;
//  4. executions (executions.go): sync throughput with the state store on
//     and off, async latency, 10,000 async executions, batches, RSS;
//  5. MCP: echo over toold's /mcp against the same tool over REST and
//     against a bare go-sdk stateless server, alternately;
//  6. hosting: an upstream stdio MCP server's echo called directly by a
//     go-sdk client, and through toold (REST and /mcp), one at a time;
//  7. uploads (uploads.go): RSS growth under 1,000 stalled 1 MiB uploads.
//
// -only runs some of them (peers,gc,throughput,overload,memory,executions,mcp,hosting,uploads).
//
// Servers run pinned to CPU 0 and the generator to CPU 1 when taskset
// exists. Run it with `make load` (go run ./bench/load).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"time"
)

// scenarios names every scenario, as -only takes them.
var scenarios = []string{"peers", "gc", "throughput", "overload", "memory", "executions", "mcp", "hosting", "uploads"}

type options struct {
	round, overload time.Duration
	rounds, conns   int
	clients, queued int
	only            []string // the scenarios to run
	profile         string
	uploads         int
	uploadBytes     int
	uploadHold      time.Duration
	bin             string // a toold binary to measure instead of building one
	base            string // a toold build to measure against (-only versus)
}

func (o options) runs(scenario string) bool { return slices.Contains(o.only, scenario) }

// pprofConfig turns on toold's /debug/pprof when -profile asks for
// profiles (it is off by default).
func (o options) pprofConfig() string {
	if o.profile == "" {
		return ""
	}
	return "server: {pprof: true}\n"
}

// selected is what -only and -skip-executions leave to run: the scenarios
// -only names (all without it), less executions with -skip-executions.
func selected(only string, skipExecutions bool) []string {
	s := scenarios
	if only != "" {
		s = strings.Split(only, ",")
	}
	if skipExecutions {
		s = slices.DeleteFunc(slices.Clone(s), func(x string) bool { return x == "executions" })
	}
	return s
}

func main() {
	role := flag.String("role", "", "internal: run as the bare server")
	var o options
	flag.DurationVar(&o.round, "round", 4*time.Second, "length of one throughput round")
	flag.IntVar(&o.rounds, "rounds", 3, "throughput rounds per server, alternating")
	flag.IntVar(&o.conns, "conns", 64, "connections of the throughput generator")
	flag.DurationVar(&o.overload, "overload", 10*time.Second, "length of the overload scenario")
	flag.IntVar(&o.clients, "clients", 500, "concurrent clients of the overload scenario")
	flag.IntVar(&o.queued, "queued", 1000, "callers to park in a queue for the memory figure")
	only := flag.String("only", "", "scenarios to run, comma-separated (default all): "+strings.Join(scenarios, ",")+
		"; and versus or versus-cost (the store's cost alone), with -base, which only -only runs")
	skipExecutions := flag.Bool("skip-executions", false, "leave out the state store and executions scenarios (short for -only without executions)")
	flag.IntVar(&o.uploads, "uploads", 1000, "stalled uploads of the uploads scenario")
	flag.IntVar(&o.uploadBytes, "upload-bytes", 1<<20, "body size each stalled upload announces")
	flag.DurationVar(&o.uploadHold, "upload-hold", 7*time.Second, "how long the uploads stall while RSS is polled")
	flag.StringVar(&o.bin, "bin", "", "measure this toold binary instead of building ./cmd/toold (to compare two builds)")
	flag.StringVar(&o.base, "base", "", "with -only versus or versus-cost: the toold build to measure this one against, side by side")
	flag.StringVar(&o.profile, "profile", "", "write CPU profiles of toold with the store on (FILE) and off (FILE.off), taken during their first round")
	flag.Parse()
	o.only = selected(*only, *skipExecutions)
	switch *role {
	case "bare":
		serveBare()
		return
	case "baremcp":
		serveBareMCP()
		return
	case "baremcpraw":
		serveBareMCPRaw()
		return
	case "mcpstdio":
		serveMCPStdio()
		return
	}
	log.SetFlags(0)
	if err := harness(o); err != nil {
		log.Fatal("load: ", err)
	}
}

func harness(o options) error {
	dir, err := os.MkdirTemp("", "toold-load-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := o.bin
	if bin == "" {
		if bin, err = buildToold(dir); err != nil {
			return err
		}
	}
	pinned := pinSelf()
	fmt.Printf("toold load harness: %s, GOMAXPROCS %d, servers pinned to CPU 0 and generator to CPU 1: %v\n",
		runtime.Version(), runtime.GOMAXPROCS(0), pinned)

	bare, err := startBare(dir, pinned)
	if err != nil {
		return err
	}
	defer bare.stop()
	td, err := startToold(bin, dir, "main", `
tools:
  echo: {enabled: true}
  sleep: {enabled: true, limits: {max_in_flight: 10, max_queue: 100, timeout: 30s, max: 10s, target: 1s}}
`+o.pprofConfig(), pinned)
	if err != nil {
		return err
	}
	defer td.stop()
	idle := td.rss()

	if o.runs("peers") {
		if err := peers(o, dir, pinned, bare, td); err != nil {
			return err
		}
	}
	if o.runs("gc") {
		if err := gcTuning(o, bin, dir, pinned); err != nil {
			return err
		}
	}
	if o.runs("throughput") {
		if err := throughput(o, bare.addr, td.addr); err != nil {
			return err
		}
	}
	if o.runs("mcp") {
		bareMCP, err := startBareMCP(pinned)
		if err != nil {
			return err
		}
		defer bareMCP.stop()
		if err := mcpThroughput(o, td.addr, bareMCP.addr); err != nil {
			return err
		}
	}
	if o.runs("hosting") {
		if err := hosting(bin, dir, pinned); err != nil {
			return err
		}
	}
	if o.runs("overload") {
		if err := overload(o, td); err != nil {
			return err
		}
	}
	if o.runs("memory") {
		if err := memory(o, bin, dir, pinned, idle); err != nil {
			return err
		}
	}
	if o.runs("uploads") {
		if err := uploads(o, bin, dir, pinned); err != nil {
			return err
		}
	}
	if o.runs("executions") {
		if err := executions(o, bin, dir, pinned, td, idle); err != nil {
			return err
		}
	}
	if o.runs("versus") || o.runs("versus-cost") {
		return versus(o, bin, dir, pinned)
	}
	return nil
}

// buildToold builds the real binary, as deployed.
func buildToold(dir string) (string, error) {
	return goBuild(dir, "toold", ".", "./cmd/toold")
}

// goBuild builds pkg, from the directory at rel to the repository's root
// (its own module there, if it has one), into dir/name.
func goBuild(dir, name, rel, pkg string) (string, error) {
	root, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	bin := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = filepath.Join(filepath.Dir(strings.TrimSpace(string(root))), rel)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s in %s: %v\n%s", pkg, rel, err, out)
	}
	return bin, nil
}

// pinSelf moves every thread of this process to CPU 1 and the Go scheduler
// to one P, when taskset exists and there are two CPUs or more.
func pinSelf() bool {
	if _, err := exec.LookPath("taskset"); err != nil || runtime.NumCPU() < 2 {
		return false
	}
	if err := exec.Command("taskset", "-a", "-p", "-c", "1", fmt.Sprint(os.Getpid())).Run(); err != nil {
		return false
	}
	runtime.GOMAXPROCS(1)
	return true
}

// server is a child process serving on loopback.
type server struct {
	cmd   *exec.Cmd
	addr  string // host:port
	admin string // http://host:port, toold only
	nats  string // the cluster's client URLs, a toold on a cluster only
}

func (s *server) stop() {
	_ = s.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
	}
}

// rss reads the server's resident set from /proc, in bytes.
func (s *server) rss() int64 { return s.status("VmRSS:") }

// peakRSS is the largest resident set the server has had, in bytes.
func (s *server) peakRSS() int64 { return s.status("VmHWM:") }

// status reads a size in kB from /proc/PID/status, in bytes.
func (s *server) status(field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, field) {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(line, field)), "%d", &kb)
			return kb << 10
		}
	}
	return -1
}

// cpu is the CPU time the server has used so far (user and system), read
// from /proc: on a machine others share, calls per CPU-second compare two
// servers more fairly than calls per second.
func (s *server) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// The fields after the command name (which may hold spaces) start
	// after the last ')'; utime and stime are the 12th and 13th of them.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	var ut, st int64
	fmt.Sscan(f[11], &ut)
	fmt.Sscan(f[12], &st)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ is 100 on Linux
}

func command(pinned bool, name string, args ...string) *exec.Cmd {
	if pinned {
		return exec.Command("taskset", append([]string{"-c", "0", name}, args...)...)
	}
	return exec.Command(name, args...)
}

var addrRE = regexp.MustCompile(`http://([0-9.]+:[0-9]+)`)

// start runs cmd and waits for the lines naming its addresses.
func start(cmd *exec.Cmd, want ...string) (*server, map[string]string, error) {
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	found := map[string]string{}
	sc := bufio.NewScanner(out)
	deadline := time.AfterFunc(20*time.Second, func() { _ = cmd.Process.Kill() })
	defer deadline.Stop()
	for len(found) < len(want) && sc.Scan() {
		for _, w := range want {
			if m := addrRE.FindStringSubmatch(sc.Text()); m != nil && strings.Contains(sc.Text(), w) {
				found[w] = m[1]
			}
		}
	}
	if len(found) < len(want) {
		return nil, nil, fmt.Errorf("%s did not start", cmd.Path)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return &server{cmd: cmd}, found, nil
}

func startBare(dir string, pinned bool) (*server, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	s, addrs, err := start(command(pinned, self, "-role", "bare"), "bare")
	if err != nil {
		return nil, err
	}
	s.addr = addrs["bare"]
	return s, nil
}

// startToold starts toold with the config (on top of the built-in one), its
// logs going to a file as an operator's would.
func startToold(bin, dir, name, config string, pinned bool, env ...string) (*server, error) {
	ws := filepath.Join(dir, "ws-"+name)
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(cfg, []byte("workspace: "+ws+"\n"+config), 0o644); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := command(pinned, bin, "-config", cfg, "-listen", "127.0.0.1:0", "-admin-listen", "127.0.0.1:0",
		"-state-dir", filepath.Join(dir, "state-"+name))
	cmd.Stderr = logf
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	s, addrs, err := start(cmd, "listening on", "/metrics")
	if err != nil {
		// What toold said is in its log, which goes with the run's
		// directory: say its end.
		logged, _ := os.ReadFile(logf.Name())
		return nil, fmt.Errorf("%w: %s", err, lastLines(logged, 3))
	}
	s.addr, s.admin = addrs["listening on"], "http://"+addrs["/metrics"]
	time.Sleep(500 * time.Millisecond) // settle before the idle RSS is read
	return s, nil
}

// lastLines is the end of a log, n lines at most.
func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
