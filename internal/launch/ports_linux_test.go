package launch

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toold/toold/internal/launch/launchtest"
)

// TestProtectedPortsAreOutOfReach: issue 24, finding 1. A run with the
// network shares the host's network namespace and reached toold's own
// listeners on loopback. Once ProtectPorts names them, a networked run in
// every mode (a launcher started before the call, and one started after)
// cannot connect to them, while it still reaches
// another port of the same host.
//
// Issue 38, finding 1: Landlock's rule sees TCP sockets only, and a run
// connected to toold's port over MPTCP (socket(AF_INET, SOCK_STREAM,
// IPPROTO_MPTCP)), in every mode. Now the port guard's socket rules
// refuse that socket with EPERM in every mode, in runs without the
// syscall filter too (containment none, seccomp: false: the launcher
// started after ProtectPorts here), and a run still sends UDP.
func TestProtectedPortsAreOutOfReach(t *testing.T) {
	listen := func(network, addr string) int {
		ln, err := net.Listen(network, addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		return ln.Addr().(*net.TCPAddr).Port
	}
	toold := listen("tcp", "127.0.0.1:0")
	other := listen("tcp", "127.0.0.1:0")
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	for _, m := range modes {
		t.Run(string(m), func(t *testing.T) {
			l := testLauncher(t, m, Config{})
			before := commandRunner(t, l, Sandbox{Network: NetworkOn()})
			if err := l.ProtectPorts(toold); errors.Is(err, ErrNoPortGuard) {
				launchtest.Unavailable(t, "%v", err)
			} else if err != nil {
				t.Fatal(err)
			}
			after := commandRunner(t, l, Sandbox{Network: NetworkOn(), Seccomp: new(false)})
			for name, r := range map[string]*Runner{"started before": before, "started after": after} {
				for port, reach := range map[int]bool{toold: false, other: true} {
					res, err := runFor(t, r, 20*time.Second, "/bin/bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/"+strconv.Itoa(port))
					if err != nil {
						t.Fatal(err)
					}
					if res.OK != reach {
						t.Errorf("%s, port %d: connected %v, want %v; stderr %q", name, port, res.OK, reach, res.Stderr)
					}
					if !reach && !strings.Contains(res.Stderr, "Permission denied") {
						t.Errorf("%s: refused for another reason: %q", name, res.Stderr)
					}
				}
				got := probeSockets(t, r, []sockCase{
					{call: "socket", family: unix.AF_INET, typ: unix.SOCK_STREAM, prot: ipprotoMPTCP, host: "127.0.0.1", port: toold},
					{call: "socket", family: unix.AF_INET6, typ: unix.SOCK_STREAM, prot: ipprotoMPTCP, host: "::ffff:127.0.0.1", port: toold},
					{call: "socket", family: unix.AF_INET, typ: unix.SOCK_DGRAM, host: "127.0.0.1", port: udp.LocalAddr().(*net.UDPAddr).Port},
				})
				if got[0] != "socket errno 1" || got[1] != "socket errno 1" {
					t.Errorf("%s: MPTCP to toold's port: %q, want EPERM", name, got[:2])
				}
				if got[2] != "ok" {
					t.Errorf("%s: UDP: %s", name, got[2])
				}
			}
			if err := l.ProtectPorts(other); err == nil {
				t.Error("a second ProtectPorts was taken")
			}
		})
	}
}

// BenchmarkPortGuard is the cost of ProtectPorts' ruleset (one rule per
// allowed port), paid once at start:
//
//	go test ./internal/launch/ -run '^$' -bench PortGuard -benchtime 10x
func BenchmarkPortGuard(b *testing.B) {
	for b.Loop() {
		g, err := newPortGuard([]int{8080, 9090})
		if err != nil {
			b.Skip(err)
		}
		_ = g.file.Close()
	}
}
