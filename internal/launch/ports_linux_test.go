package launch

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toold/toold/internal/launch/launchtest"
)

// TestProtectedPortsAreOutOfReach: issue 24, finding 1. A run with the
// network shares the host's network namespace and reached toold's own
// listeners on loopback. Once ProtectPorts names them, a networked run in
// every mode (a launcher started before the call, and one started after)
// cannot connect to them, while it still reaches
// another port of the same host.
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
	on := true
	for _, m := range modes {
		t.Run(string(m), func(t *testing.T) {
			l := testLauncher(t, m, Config{})
			before := commandRunner(t, l, Sandbox{Network: &on})
			if err := l.ProtectPorts(toold); errors.Is(err, ErrNoPortGuard) {
				launchtest.Unavailable(t, "%v", err)
			} else if err != nil {
				t.Fatal(err)
			}
			after := commandRunner(t, l, Sandbox{Network: &on, Seccomp: new(false)})
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
