package launch

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/toold/toold/internal/launch/launchtest"
)

// TestUnixSocketsListed: a host unix socket is out of a namespaces or
// bwrap run's reach, networked or not, unless its sandbox lists it in
// unix_sockets: then it is bound in and the run connects to it. A relative
// path is refused.
func TestUnixSocketsListed(t *testing.T) {
	dir := launchtest.Workspace(t) // reachable by the run-as uid
	sock := filepath.Join(dir, "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := os.Chmod(sock, 0o777); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	connect := []string{"perl", "-MIO::Socket::UNIX", "-e", "IO::Socket::UNIX->new(Peer => $ARGV[0]) or die qq($!\\n)", sock}
	for _, mode := range []Mode{ModeNamespaces, ModeBwrap} {
		t.Run(string(mode), func(t *testing.T) {
			for _, c := range []struct {
				sb   Sandbox
				want bool
			}{{Sandbox{Network: NetworkOn()}, false}, {Sandbox{}, false}, {Sandbox{UnixSockets: []string{sock}}, true}} {
				res, err := runFor(t, sandboxed(t, mode, Config{}, c.sb), 10*time.Second, connect...)
				if err != nil {
					t.Fatal(err)
				}
				if res.OK != c.want {
					t.Errorf("%+v: connected %v, want %v (%s)", c.sb, res.OK, c.want, res.Stderr)
				}
			}
		})
	}
	l := testLauncher(t, ModeNone, Config{})
	if _, err := l.CommandRunner(Sandbox{UnixSockets: []string{"agent.sock"}}); err == nil {
		t.Error("a relative unix_sockets path was accepted")
	}
}
