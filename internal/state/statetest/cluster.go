package statetest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Node is one nats-server of a cluster on loopback: a real process built
// from the module toold embeds, its JetStream store in Dir. Programs (the
// load and chaos harnesses) use it as tests do: it needs no testing.TB.
type Node struct {
	Name  string
	Port  int // for clients
	Route int // for the other nodes
	Dir   string
	// MaxStore is JetStream's max_file_store for the node (0: the
	// server's default, a share of the disk).
	MaxStore int64
	routes   []int
	bin      string
	cmd      *exec.Cmd
}

// NewCluster prepares n nodes, one cluster, each storing under its own
// directory in dir; none is started (StartAll, or Start each).
func NewCluster(dir string, n int) ([]*Node, error) {
	bin, err := buildServer()
	if err != nil {
		return nil, err
	}
	nodes := make([]*Node, n)
	routes := make([]int, n)
	for i := range nodes {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		if routes[i], err = freePort(); err != nil {
			return nil, err
		}
		name := "n" + strconv.Itoa(i+1)
		nodes[i] = &Node{Name: name, Port: port, Route: routes[i], Dir: filepath.Join(dir, "nats-"+name), routes: routes, bin: bin}
		if err := os.MkdirAll(nodes[i].Dir, 0o700); err != nil {
			return nil, err
		}
	}
	return nodes, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// URL is the node's client URL.
func (n *Node) URL() string { return "nats://127.0.0.1:" + strconv.Itoa(n.Port) }

// config is the node's nats-server configuration: JetStream, and routes to
// the others.
func (n *Node) config() string {
	var routes []string
	for _, r := range n.routes {
		if r != n.Route {
			routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", r))
		}
	}
	limit := ""
	if n.MaxStore > 0 {
		limit = fmt.Sprintf("\n  max_file_store: %d", n.MaxStore)
	}
	return fmt.Sprintf("server_name: %s\nlisten: 127.0.0.1:%d\njetstream {\n  store_dir: %q%s\n}\n"+
		"cluster {\n  name: toold\n  listen: 127.0.0.1:%d\n  routes: [%s]\n}\n",
		n.Name, n.Port, filepath.Join(n.Dir, "js"), limit, n.Route, strings.Join(routes, ", "))
}

// Start runs the node (again, after Kill: same ports, same store) and
// waits until it accepts clients.
func (n *Node) Start() error {
	conf := n.Dir + ".conf"
	if err := os.WriteFile(conf, []byte(n.config()), 0o600); err != nil {
		return err
	}
	n.cmd = exec.Command(n.bin, "-c", conf)
	if err := StartReady(n.cmd); err != nil {
		n.Kill()
		return fmt.Errorf("nats node %s: %w", n.Name, err)
	}
	return nil
}

// Kill ends the node at once (SIGKILL), as a crash would.
func (n *Node) Kill() {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	_ = n.cmd.Process.Kill()
	_ = n.cmd.Wait()
	n.cmd = nil
}

// Pid is the node's process id (0 when it is not running).
func (n *Node) Pid() int {
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// StartAll starts nodes at once (a cluster forms only when they meet).
func StartAll(nodes []*Node) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { errs[i] = n.Start() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ClusterURL is every node's client URL, comma-separated, as
// state.Options.URL (state.nats.url) takes them.
func ClusterURL(nodes []*Node) string {
	urls := make([]string, len(nodes))
	for i, n := range nodes {
		urls[i] = n.URL()
	}
	return strings.Join(urls, ",")
}

// WaitForJetStream waits until the cluster at url answers JetStream's API
// (it elected its meta leader) and can place a stream on every one of its
// nodes (each is a peer the meta leader sees online: without it, a stream
// with as many replicas as nodes is refused "no suitable peers"), at most
// d. It checks by creating and deleting a small stream.
func WaitForJetStream(url string, d time.Duration) error {
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	probe := jetstream.StreamConfig{Name: "statetest_probe", Subjects: []string{"statetest.probe"},
		Storage: jetstream.MemoryStorage, Replicas: len(strings.Split(url, ","))}
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := js.CreateOrUpdateStream(ctx, probe)
		if err == nil {
			err = js.DeleteStream(ctx, probe.Name)
		}
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the cluster did not serve JetStream on all %d nodes within %v: %w", probe.Replicas, d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// StartCluster starts three nodes as one cluster (streams span it with
// Replicas: 3) and waits until it serves JetStream; they are killed when
// the test ends.
func StartCluster(t testing.TB) []*Node {
	t.Helper()
	nodes, err := NewCluster(t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		t.Cleanup(n.Kill)
	}
	if err := StartAll(nodes); err != nil {
		t.Fatal(err)
	}
	if err := WaitForJetStream(ClusterURL(nodes), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	return nodes
}
