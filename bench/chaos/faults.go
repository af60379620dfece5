//go:build linux

package main

import (
	"fmt"
	"time"
)

// A schedule is the faults a run injects, in order, with calm load
// between them.
var schedules = map[string][]string{
	"full":  {"replica-kill", "nats-node-kill", "stream-leader-kill", "quorum-loss", "disk-full", "replica-paused"},
	"short": {"replica-kill", "nats-node-kill"},
}

// executionsStream is the stream of the executions bucket: its leader is
// the node whose loss an accepted execution feels first.
const executionsStream = "KV_toold_executions"

// inject runs one fault to its end, the cluster and replicas healed.
func (h *harness) inject(name string) *fault {
	f := &fault{name: name, start: time.Now()}
	h.logf("fault %s", name)
	switch name {
	case "replica-kill":
		h.killReplica(f, h.replicas[0])
	case "nats-node-kill":
		h.killNodes(f, 0, h.follower())
	case "stream-leader-kill":
		leader, err := leaderOf(h.js, executionsStream)
		if err != nil {
			f.skipped = err.Error()
			break
		}
		h.logf("  %s is led by %s", executionsStream, leader)
		h.killNodes(f, 0, h.node(leader))
	case "quorum-loss":
		// Two of three, for 15s: no stream can elect a leader until one
		// is back.
		h.killNodes(f, 15*time.Second, h.nodes[0], h.nodes[1])
	case "disk-full":
		h.diskFull(f, h.nodes[2])
	case "replica-paused":
		h.pauseReplica(f, h.replicas[len(h.replicas)-1], 3*heartbeat+3*time.Second)
	default:
		f.skipped = "no such fault"
	}
	if f.skipped == "" {
		h.heal(f)
	} else {
		f.end = time.Now()
	}
	h.logf("  healed after %v %s%s", f.end.Sub(f.start).Round(time.Millisecond), f.skipped, f.problem)
	return f
}

// follower is a node that leads neither the executions bucket nor holds
// the tmpfs (another fault's): a plain node loss.
func (h *harness) follower() *node {
	leader, _ := leaderOf(h.js, executionsStream)
	for _, n := range h.nodes[:2] {
		if n.Name != leader {
			return n
		}
	}
	return h.nodes[0]
}

// killReplica SIGKILLs a replica mid-load and starts it again.
func (h *harness) killReplica(f *fault, r *replica) {
	h.setServing(r, false)
	h.mu.Lock()
	h.kills = append(h.kills, kill{r.name, time.Now()})
	h.mu.Unlock()
	r.kill()
	time.Sleep(2 * time.Second)
	if err := r.start(); err != nil {
		f.problem = err.Error()
		return
	}
	h.setServing(r, true)
}

// killNodes SIGKILLs nodes, holds them down for hold (at least 3s), and
// starts them again. With two of three down the store is unavailable:
// that window is recorded, for the check that new calls were refused.
func (h *harness) killNodes(f *fault, hold time.Duration, nodes ...*node) {
	for _, n := range nodes {
		h.logf("  SIGKILL %s", n.Name)
		n.Kill()
	}
	if len(nodes) >= 2 {
		// Calls already in flight may be answered by the last leader's
		// replication; those made a moment later must all be refused.
		f.storeDown[0] = time.Now().Add(3 * time.Second)
	}
	time.Sleep(max(hold, 3*time.Second))
	if len(nodes) >= 2 {
		f.storeDown[1] = time.Now()
	}
	for _, n := range nodes {
		if err := n.Start(); err != nil {
			f.problem = err.Error()
		}
	}
}

// diskFull fills a node's store until its JetStream gives up, holds it
// there, then frees the space and restarts the node (an operator's fix).
func (h *harness) diskFull(f *fault, n *node) {
	if err := n.fill(); err != nil {
		f.skipped = err.Error()
		return
	}
	h.logf("  %s's store is full", n.Name)
	time.Sleep(8 * time.Second)
	if err := n.free(); err != nil {
		f.problem = err.Error()
	}
	n.Kill()
	if err := n.Start(); err != nil {
		f.problem = err.Error()
	}
}

// pauseReplica stops a replica (SIGSTOP) for longer than its lease, so
// the others take its executions over, then lets it go on.
func (h *harness) pauseReplica(f *fault, r *replica, d time.Duration) {
	f.paused = r.name
	h.setServing(r, false)
	if err := r.pause(); err != nil {
		f.problem = err.Error()
		return
	}
	time.Sleep(d)
	if err := r.resume(); err != nil {
		f.problem = fmt.Sprintf("SIGCONT: %v", err)
	}
	h.setServing(r, true)
}
