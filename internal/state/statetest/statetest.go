// Package statetest gives tests a real JetStream: an embedded store in a
// temporary directory, or a real nats-server process built from the module
// toold embeds, on a loopback port. It is used only by tests; there is no
// in-memory stand-in for the store anywhere.
package statetest

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toold/toold/internal/state"
)

// Open opens an embedded store in a fresh temporary directory, closed when
// the test ends.
func Open(t testing.TB, reg prometheus.Registerer, name string) *state.Store {
	t.Helper()
	st, err := state.Open(context.Background(), state.Options{Dir: t.TempDir(), Name: name, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// OpenPair opens an embedded store that also listens on loopback, and a
// second store connected to it over TCP: two replicas sharing one NATS, in
// one process, each with its own connection (closing one is that
// replica's death). Unless opts name credentials, both share a random
// token (a listening store requires one).
func OpenPair(t testing.TB, opts state.Options) (a, b *state.Store) {
	t.Helper()
	if opts.Token == "" && opts.User == "" && opts.NKeySeedFile == "" {
		opts.Token = Token()
	}
	oa := opts
	oa.Dir, oa.Listen, oa.Name = t.TempDir(), "127.0.0.1:0", "replica-a"
	a, err := state.Open(context.Background(), oa)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	ob := opts
	ob.URL, ob.Name = a.ClientURL(), "replica-b"
	b, err = state.Open(context.Background(), ob)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return a, b
}

// Token is a random token long enough for a listening store.
func Token() string {
	return rand.Text() + rand.Text()
}

// AnonymousConnect speaks the NATS protocol as a hostile local process
// would: it connects to the server at clientURL presenting no credentials
// at all (CONNECT {}) and pings. It returns the server's first line after
// its INFO: "PONG" (or "+OK") when it let the client in, "-ERR ..." when
// it did not.
func AnonymousConnect(t testing.TB, clientURL string) string {
	t.Helper()
	u, err := url.Parse(clientURL)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	info, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(info, "INFO ") {
		t.Fatalf("no INFO from the server: %q %v", info, err)
	}
	if _, err := c.Write([]byte("CONNECT {}\r\nPING\r\n")); err != nil {
		t.Fatal(err)
	}
	line, err := r.ReadString('\n')
	if err != nil && line == "" {
		return "closed: " + err.Error()
	}
	return strings.TrimSpace(line)
}

// ReplaceStream does to a stream what a client of the store can even when
// the stream refuses to delete messages (the audit log): delete the whole
// stream, create it anew with its configuration (deny flags cleared), and
// publish msgs to subject, one message each. Tests play attackers with it.
func ReplaceStream(t testing.TB, st *state.Store, stream, subject string, msgs [][]byte) {
	t.Helper()
	ctx := context.Background()
	js := st.JetStream()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.DenyDelete, cfg.DenyPurge = false, false
	if err := js.DeleteStream(ctx, stream); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if _, err := js.Publish(ctx, subject, m); err != nil {
			t.Fatal(err)
		}
	}
}

// ServerBinary builds nats-server from the module's own dependency and
// returns its path. See buildServer for where it is kept.
func ServerBinary() (string, error) { return buildServer() }

// natsServerModule is the nats-server toold embeds, the one the tests run.
const natsServerModule = "github.com/nats-io/nats-server/v2"

// buildServer returns a nats-server binary of the version go.mod requires,
// kept in the user's cache directory (toold/nats-server-VERSION-OS_ARCH) so
// that it is built once per machine and version, not once per test binary
// into a temporary directory nobody removes (24 MB each). It is built under
// a temporary name beside its final one and renamed into place: test
// binaries running at once may each build it, and none ever sees a half
// written file (the temporary directory is on the same filesystem, so the
// rename is atomic). A nats-server replaced by a local directory has no version
// to key it by, so it is rebuilt (once per test binary) onto one name.
var buildServer = sync.OnceValues(cachedServer)

func cachedServer() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f",
		"{{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}", natsServerModule).Output()
	if err != nil {
		return "", fmt.Errorf("go list -m %s: %w", natsServerModule, err)
	}
	version := strings.TrimSpace(string(out))
	cached := version != ""
	if !cached {
		version = "local"
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	dir = filepath.Join(dir, "toold")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, fmt.Sprintf("nats-server-%s-%s_%s", version, runtime.GOOS, runtime.GOARCH))
	if fi, err := os.Stat(bin); cached && err == nil && fi.Mode().IsRegular() {
		return bin, nil
	}
	tmp, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	built := filepath.Join(tmp, "nats-server")
	out, err = exec.CommandContext(ctx, "go", "build", "-o", built, natsServerModule).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("building nats-server: %v\n%s", err, out)
	}
	if err := os.Rename(built, bin); err != nil {
		return "", err
	}
	return bin, nil
}

// Server is a nats-server process with JetStream on loopback.
type Server struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	cmd  *exec.Cmd
	URL  string
}

// StartServer builds (once) and starts a real nats-server with JetStream in
// a temporary directory on a free loopback port; it is stopped when the
// test ends.
func StartServer(t testing.TB) *Server {
	t.Helper()
	bin, err := buildServer()
	if err != nil {
		t.Fatal(err)
	}
	port := FreePort(t)
	s := &Server{t: t, bin: bin, dir: t.TempDir(), port: port, URL: "nats://127.0.0.1:" + strconv.Itoa(port)}
	s.Start()
	t.Cleanup(func() { s.Kill() })
	return s
}

// Start (re)starts the process on the same port and directory, and waits
// until it accepts connections.
func (s *Server) Start() {
	s.t.Helper()
	if err := s.start(); err != nil {
		s.t.Fatal(err)
	}
}

func (s *Server) start() error {
	s.cmd = exec.Command(s.bin, "-a", "127.0.0.1", "-p", strconv.Itoa(s.port), "-js", "-sd", s.dir)
	return StartReady(s.cmd)
}

// StartReady starts cmd, a nats-server, and waits until it says it is
// ready. When it exits first, or is not ready within 20 seconds, the error
// holds what it logged. Ending the process is the caller's, whatever
// StartReady returns once cmd has started.
func StartReady(cmd *exec.Cmd) error {
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	ready, exited := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var log strings.Builder
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stderr)
		isReady := false
		for sc.Scan() { // to the end: a full pipe would block the server
			if isReady {
				continue
			}
			mu.Lock()
			log.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if strings.Contains(sc.Text(), "Server is ready") {
				isReady = true
				close(ready)
			}
		}
	}()
	logged := func() string { mu.Lock(); defer mu.Unlock(); return log.String() }
	select {
	case <-ready:
		return nil
	case <-exited:
		select {
		case <-ready:
			return nil
		default:
		}
		return fmt.Errorf("nats-server exited before it was ready:\n%s", logged())
	case <-time.After(20 * time.Second):
		return fmt.Errorf("nats-server was not ready after 20s:\n%s", logged())
	}
}

// FreePort returns a loopback TCP port that was free when asked.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// Stop ends the process gracefully (SIGTERM) and waits for it.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
	s.cmd = nil
}

// Kill ends the process at once.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Ops counts the store operations a registry's store made so far, by
// operation (the op label of toold_store_operation_duration_seconds, such
// as "toold_executions_get" or "events_publish").
func Ops(t testing.TB, reg *prometheus.Registry) map[string]uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	ops := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "toold_store_operation_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "op" {
					ops[l.GetValue()] = m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return ops
}
