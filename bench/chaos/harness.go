//go:build linux

package main

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toold/toold/internal/state/statetest"
)

// harness is one run: the NATS cluster, the toold replicas, the load, and
// what happened when.
type harness struct {
	dir, bin string
	out      io.Writer
	nodes    []*node
	nc       *nats.Conn
	js       jetstream.JetStream
	keyFile  string
	marks    string

	mu       sync.Mutex
	replicas []*replica
	serving  map[string]bool // replicas the load may call now
	faults   []*fault
	kills    []kill // replicas SIGKILLed, and when
	// unflushed counts the calls answered now whose audit records a
	// replica SIGKILLed right after held unflushed.
	unflushed int
	// recovered counts the audit records a replica wrote for the ends a
	// lost replica had not flushed (its audit lease fired).
	recovered int
}

// kill is a replica's SIGKILL.
type kill struct {
	replica string
	at      time.Time
}

// fault is one fault of the schedule, as it happened.
type fault struct {
	name        string
	start, end  time.Time // from the fault to the cluster and replicas serving again
	storeDown   [2]time.Time
	skipped     string // why it did not run
	problem     string // what went wrong while injecting it (not an invariant)
	callsDuring int
	paused      string // the replica a replica-paused fault stopped
}

// setup builds toold (unless bin names one), starts the cluster and the
// replicas. With tmpfs one node's store is a small tmpfs (the disk-full
// fault); without, every node may store maxStore bytes.
func setup(dir, bin string, replicas int, tmpfs bool, maxStore int64, out io.Writer) (*harness, error) {
	h := &harness{dir: dir, out: out, serving: map[string]bool{}, bin: bin}
	var err error
	if h.bin == "" {
		if h.bin, err = buildToold(dir); err != nil {
			return nil, err
		}
	}
	if h.nodes, err = newCluster(dir, tmpfs, maxStore); err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(h.nodes))
	for i, n := range h.nodes {
		wg.Go(func() { errs[i] = n.Start() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		h.close()
		return nil, err
	}
	if h.nc, h.js, err = jsClient(h.nodes); err != nil {
		h.close()
		return nil, err
	}
	if err := statetest.WaitForJetStream(clusterURL(h.nodes), 30*time.Second); err != nil {
		h.close()
		return nil, err
	}
	h.keyFile = filepath.Join(dir, "audit.key")
	if out, err := exec.Command(h.bin, "audit", "keygen", "-o", h.keyFile).CombinedOutput(); err != nil {
		h.close()
		return nil, fmt.Errorf("toold audit keygen: %v: %s", err, out)
	}
	// Commands run as an unprivileged uid under containment none as
	// root: their workspace and the marks file must be theirs to use.
	ws := filepath.Join(dir, "workspace")
	marksDir := filepath.Join(dir, "marks")
	for _, d := range []string{ws, marksDir} {
		if err := os.MkdirAll(d, 0o777); err != nil {
			h.close()
			return nil, err
		}
		_ = os.Chmod(d, 0o777)
	}
	_ = os.Chmod(dir, 0o755)
	h.marks = filepath.Join(marksDir, "runs")
	for i := range replicas {
		name := fmt.Sprintf("r%d", i+1)
		r := newReplica(name, h.bin, dir, toolConfig(clusterURL(h.nodes), name, ws, h.marks, h.keyFile))
		if err := r.start(); err != nil {
			h.close()
			return nil, err
		}
		h.replicas = append(h.replicas, r)
		h.serving[name] = true
	}
	if err := waitStreamsLed(h.js, 30*time.Second); err != nil {
		h.close()
		return nil, err
	}
	return h, nil
}

// buildToold builds the real binary from ./cmd/toold.
func buildToold(dir string) (string, error) {
	root, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	bin := filepath.Join(dir, "toold")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/toold")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(root)))
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/toold: %v\n%s", err, out)
	}
	return bin, nil
}

// close stops everything this harness started.
func (h *harness) close() {
	for _, r := range h.replicas {
		r.kill()
	}
	if h.nc != nil {
		h.nc.Close()
	}
	for _, n := range h.nodes {
		n.Kill()
		n.unmount()
	}
}

// pick is a replica the load may call now, at random.
func (h *harness) pick(rng *rand.Rand) *replica {
	h.mu.Lock()
	defer h.mu.Unlock()
	var up []*replica
	for _, r := range h.replicas {
		if h.serving[r.name] {
			up = append(up, r)
		}
	}
	if len(up) == 0 {
		return nil
	}
	return up[rng.IntN(len(up))]
}

func (h *harness) setServing(r *replica, on bool) {
	h.mu.Lock()
	h.serving[r.name] = on
	h.mu.Unlock()
}

func (h *harness) logf(format string, args ...any) {
	fmt.Fprintf(h.out, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

// ready waits until every replica answers /readyz 200 (its store is
// back), at most d.
func (h *harness) ready(d time.Duration) error {
	deadline := time.Now().Add(d)
	c := &http.Client{Timeout: 2 * time.Second}
	for _, r := range h.replicas {
		for {
			resp, err := c.Get(r.url + "/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					break
				}
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("replica %s not ready after %v", r.name, d)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// heal waits for the cluster's streams and every replica's store.
func (h *harness) heal(f *fault) {
	if err := waitStreamsLed(h.js, 90*time.Second); err != nil {
		f.problem = err.Error()
	}
	if err := h.ready(60 * time.Second); err != nil && f.problem == "" {
		f.problem = err.Error()
	}
	f.end = time.Now()
}

func (h *harness) node(name string) *node {
	for _, n := range h.nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}
