package main

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
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toold/toold/internal/state/statetest"
)

// node is one nats-server of the three-node cluster: a real process built
// from the nats-server module toold embeds, on loopback, its JetStream
// store in a directory of its own (for one node, a small tmpfs, so that
// its disk can be filled).
type node struct {
	name        string
	bin         string
	port, route int
	routes      []int // every node's cluster port
	dir         string
	tmpfs       bool  // dir is a tmpfs of tmpfsBytes this harness mounted
	maxStore    int64 // JetStream's max_file_store
	cmd         *exec.Cmd
}

// tmpfsBytes is the size of the tmpfs holding one node's store: large
// enough for the streams' reservations (see toold's config in
// replicas.go), small enough to fill in a moment.
const tmpfsBytes = 384 << 20

// freePort asks the kernel for a loopback port free now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// newCluster prepares three nodes under dir. With tmpfs, the third one's
// store is a tmpfs when mounting one is allowed (root), else a plain
// directory and the disk-full fault is skipped; without, every node may
// use maxStore bytes of disk.
func newCluster(dir string, tmpfs bool, maxStore int64) ([]*node, error) {
	bin, err := statetest.ServerBinary()
	if err != nil {
		return nil, err
	}
	nodes := make([]*node, 3)
	routes := make([]int, 3)
	for i := range nodes {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		r, err := freePort()
		if err != nil {
			return nil, err
		}
		routes[i] = r
		nodes[i] = &node{name: "n" + strconv.Itoa(i+1), bin: bin, port: p, route: r, dir: filepath.Join(dir, "nats-n"+strconv.Itoa(i+1)),
			maxStore: maxStore}
		if err := os.MkdirAll(nodes[i].dir, 0o700); err != nil {
			return nil, err
		}
	}
	for _, n := range nodes {
		n.routes = routes
	}
	last := nodes[2]
	if tmpfs && syscall.Mount("tmpfs", last.dir, "tmpfs", 0, "size="+strconv.Itoa(tmpfsBytes)) == nil {
		last.tmpfs, last.maxStore = true, tmpfsBytes*3/4
	}
	return nodes, nil
}

// url is the client URL of every node, as toold's state.nats.url takes it.
func clusterURL(nodes []*node) string {
	var urls []string
	for _, n := range nodes {
		urls = append(urls, "nats://127.0.0.1:"+strconv.Itoa(n.port))
	}
	return strings.Join(urls, ",")
}

// config is the node's nats-server configuration: JetStream with limits
// the tmpfs can hold, and routes to the other two.
func (n *node) config() string {
	var routes []string
	for _, r := range n.routes {
		if r != n.route {
			routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", r))
		}
	}
	return fmt.Sprintf(`server_name: %s
listen: 127.0.0.1:%d
jetstream {
  store_dir: %q
  max_file_store: %d
  max_memory_store: 64MB
}
cluster {
  name: chaos
  listen: 127.0.0.1:%d
  routes: [%s]
}
`, n.name, n.port, filepath.Join(n.dir, "js"), n.maxStore, n.route, strings.Join(routes, ", "))
}

// start runs the node and waits until it accepts clients.
func (n *node) start() error {
	conf := filepath.Join(filepath.Dir(n.dir), n.name+".conf")
	if err := os.WriteFile(conf, []byte(n.config()), 0o600); err != nil {
		return err
	}
	n.cmd = exec.Command(n.bin, "-c", conf)
	if err := statetest.StartReady(n.cmd); err != nil {
		n.kill()
		return fmt.Errorf("nats node %s: %w", n.name, err)
	}
	return nil
}

// kill ends the node at once (SIGKILL), as a crash would.
func (n *node) kill() {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	_ = n.cmd.Process.Kill()
	_ = n.cmd.Wait()
	n.cmd = nil
}

// running reports whether the node's process is up.
func (n *node) running() bool { return n.cmd != nil }

// fill takes all but a sliver of the node's tmpfs with one file, so the
// next writes of its JetStream store fail for lack of space.
func (n *node) fill() error {
	if !n.tmpfs {
		return errors.New("the node's store is not on a tmpfs this harness could mount (not root?)")
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(n.dir, &st); err != nil {
		return err
	}
	free := int64(st.Bavail) * st.Bsize
	f, err := os.Create(filepath.Join(n.dir, "filler"))
	if err != nil {
		return err
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for left := free; left > 0; left -= int64(len(chunk)) {
		if _, err := f.Write(chunk[:min(int64(len(chunk)), left)]); err != nil {
			break // full: that is the point
		}
	}
	return nil
}

// free gives the space back.
func (n *node) free() error { return os.Remove(filepath.Join(n.dir, "filler")) }

// unmount removes the tmpfs (after the node stopped).
func (n *node) unmount() {
	if n.tmpfs {
		_ = syscall.Unmount(n.dir, syscall.MNT_DETACH)
	}
}

// jsClient connects the harness to the cluster, for what only JetStream
// can tell (which node leads a stream) and for waiting until it serves.
func jsClient(nodes []*node) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(clusterURL(nodes), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond), nats.Name("chaos-harness"))
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// waitJetStream waits until the cluster has a JetStream meta leader (an
// account info request answers), at most d.
func waitJetStream(js jetstream.JetStream, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := js.AccountInfo(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("JetStream did not serve within %v: %w", d, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitStreamsLed waits until every stream and bucket toold made has a
// leader again and all replicas current, at most d: after a node comes back the
// cluster must heal before the next fault.
func waitStreamsLed(js jetstream.JetStream, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		err := streamsLed(js)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the cluster did not heal within %v: %w", d, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func streamsLed(js jetstream.JetStream) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	names := js.StreamNames(ctx)
	n := 0
	for name := range names.Name() {
		n++
		s, err := js.Stream(ctx, name)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		ci := s.CachedInfo().Cluster
		if ci == nil || ci.Leader == "" {
			return fmt.Errorf("%s has no leader", name)
		}
		for _, p := range ci.Replicas {
			if !p.Current || p.Offline {
				return fmt.Errorf("%s: replica %s is not current", name, p.Name)
			}
		}
	}
	if err := names.Err(); err != nil {
		return err
	}
	if n == 0 {
		return errors.New("no streams yet")
	}
	return nil
}

// leaderOf names the node leading a stream.
func leaderOf(js jetstream.JetStream, stream string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return "", err
	}
	if ci := s.CachedInfo().Cluster; ci != nil && ci.Leader != "" {
		return ci.Leader, nil
	}
	return "", fmt.Errorf("%s has no leader", stream)
}
