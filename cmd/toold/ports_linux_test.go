package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/toold/toold/internal/launch/launchtest"
	"github.com/toold/toold/internal/state/statetest"
)

// TestRunsCannotReachToold: issue 24, finding 1 (the launcher's half). A
// command tool with network: true shared the host's network namespace and
// reached toold's own API on loopback (with no keys, as the anonymous
// caller). Now a networked run of each mode tries to connect to toold's
// listener and fails, while it still reaches another port of the host.
func TestRunsCannotReachToold(t *testing.T) {
	if abi, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION); e != 0 || abi < 4 {
		launchtest.Unavailable(t, "no Landlock network rules on this kernel (ABI %d, %v): toold's ports stay reachable", abi, e)
	}
	ws := launchtest.Workspace(t) // the run-as uid's to reach
	cfg := filepath.Join(t.TempDir(), "toold.yaml")
	modes := []string{"none", "namespaces"}
	if _, err := exec.LookPath("bwrap"); err == nil {
		modes = append(modes, "bwrap")
	} else {
		t.Run("bwrap", func(t *testing.T) { launchtest.Unavailable(t, "bubblewrap is not installed: %v", err) })
	}
	var tools strings.Builder
	for _, m := range modes {
		tools.WriteString("    - {name: dial_" + m + ", description: dial a port, argv: [bash, -c, 'exec 3<>/dev/tcp/127.0.0.1/$0', {arg: '{{.port}}'}], " +
			"parameters: {type: object, properties: {port: {type: string, pattern: '^[0-9]+$'}}, required: [port]}, " +
			"sandbox: {containment: " + m + ", network: true}}\n")
		tools.WriteString("    - {name: mptcp_" + m + ", description: write_file over MPTCP, argv: [perl, -e, '" + strings.ReplaceAll(mptcpWrite, "MODE", m) + "', {arg: '{{.port}}'}], " +
			"parameters: {type: object, properties: {port: {type: string, pattern: '^[0-9]+$'}}, required: [port]}, " +
			"sandbox: {containment: " + m + ", network: true}}\n")
	}
	// The embedded store listening for replicas: its port is toold's too.
	natsPort := statetest.FreePort(t)
	store := fmt.Sprintf("state:\n  nats: {listen: \"127.0.0.1:%d\", token: \"${TOOLD_NATS_TOKEN}\"}\n", natsPort)
	if err := os.WriteFile(cfg, []byte(store+"tools:\n  write_file: {enabled: true}\ncommands:\n  tools:\n"+tools.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	in := start(t, map[string]string{"TOOLD_NATS_TOKEN": statetest.Token()}, "-config", cfg, "-workspace", ws)
	u, err := url.Parse(in.url)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	su, _ := url.Parse(srv.URL)
	other := su.Port()
	for _, m := range modes {
		for _, port := range []string{u.Port(), strconv.Itoa(natsPort)} {
			code, env := in.exec("dial_"+m, `{"port": "`+port+`"}`)
			data, _ := env["data"].(map[string]any)
			if code == 200 && env["success"] == true {
				t.Errorf("%s: a networked run connected to toold's listener on %s: %v", m, port, env)
			} else if stderr, _ := data["stderr"].(string); !strings.Contains(stderr, "Permission denied") {
				t.Errorf("%s: refused for another reason on %s: %v", m, port, env)
			}
		}
		code, env := in.exec("dial_"+m, `{"port": "`+other+`"}`)
		if code != 200 || env["success"] != true {
			t.Errorf("%s: a networked run could not reach another port: %d %v", m, code, env)
		}
		// Issue 38, finding 1: over MPTCP, which Landlock's TCP rule does
		// not see, the run called write_file as the anonymous caller and
		// wrote into the workspace it had read-only.
		code, env = in.exec("mptcp_"+m, `{"port": "`+u.Port()+`"}`)
		data, _ := env["data"].(map[string]any)
		if stderr, _ := data["stderr"].(string); code != 200 || env["success"] == true || !strings.Contains(stderr, "socket: Operation not permitted") {
			t.Errorf("%s: a run over MPTCP to toold's API: %d %v", m, code, env)
		}
		if _, err := os.Stat(filepath.Join(ws, "planted-"+m)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: a run wrote into its read-only workspace through toold's API over MPTCP (%v)", m, err)
		}
	}
}

// mptcpWrite is a perl program (single quotes in YAML: none in it) that
// opens socket(AF_INET, SOCK_STREAM, IPPROTO_MPTCP), connects to toold's
// port ($ARGV[0]) and asks write_file for planted-MODE (the mode's name
// in its place), printing the answer.
const mptcpWrite = `use Socket qw(:all); my $port = shift; ` +
	`socket(my $s, AF_INET, SOCK_STREAM, 262) or die "socket: $!\n"; ` +
	`connect($s, pack_sockaddr_in($port, inet_aton("127.0.0.1"))) or die "connect: $!\n"; ` +
	`my $body = q({"path":"planted-MODE","content":"over MPTCP"}); ` +
	`syswrite($s, "POST /tools/write_file/execute HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " . length($body) . "\r\nConnection: close\r\n\r\n$body"); ` +
	`print while <$s>;`
