//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toold/toold/internal/state/statetest"
)

// node is one nats-server of the three-node cluster (statetest.Node: a
// real process built from the nats-server module toold embeds, on
// loopback), one of them with its store on a small tmpfs, so that its disk
// can be filled.
type node struct {
	*statetest.Node
	tmpfs bool // its Dir is a tmpfs of tmpfsBytes this harness mounted
}

// tmpfsBytes is the size of the tmpfs holding one node's store: large
// enough for the streams' reservations (see toold's config in
// replicas.go), small enough to fill in a moment.
const tmpfsBytes = 384 << 20

// newCluster prepares three nodes under dir, each storing at most
// maxStore. With tmpfs, the third one's store is a tmpfs when mounting one
// is allowed (root), else a plain directory and the disk-full fault is
// skipped.
func newCluster(dir string, tmpfs bool, maxStore int64) ([]*node, error) {
	inner, err := statetest.NewCluster(dir, 3)
	if err != nil {
		return nil, err
	}
	nodes := make([]*node, len(inner))
	for i, n := range inner {
		n.MaxStore = maxStore
		nodes[i] = &node{Node: n}
	}
	last := nodes[2]
	if tmpfs && syscall.Mount("tmpfs", last.Dir, "tmpfs", 0, "size="+strconv.Itoa(tmpfsBytes)) == nil {
		last.tmpfs, last.MaxStore = true, tmpfsBytes*3/4
	}
	return nodes, nil
}

// clusterURL is every node's client URL, as toold's state.nats.url takes them.
func clusterURL(nodes []*node) string {
	inner := make([]*statetest.Node, len(nodes))
	for i, n := range nodes {
		inner[i] = n.Node
	}
	return statetest.ClusterURL(inner)
}

// fill takes all but a sliver of the node's tmpfs with one file, so the
// next writes of its JetStream store fail for lack of space.
func (n *node) fill() error {
	if !n.tmpfs {
		return errors.New("the node's store is not on a tmpfs this harness could mount (not root?)")
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(n.Dir, &st); err != nil {
		return err
	}
	free := int64(st.Bavail) * st.Bsize
	f, err := os.Create(filepath.Join(n.Dir, "filler"))
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
func (n *node) free() error { return os.Remove(filepath.Join(n.Dir, "filler")) }

// unmount removes the tmpfs (after the node stopped).
func (n *node) unmount() {
	if n.tmpfs {
		_ = syscall.Unmount(n.Dir, syscall.MNT_DETACH)
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
