package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/toold/toold/internal/launch/launchtest"
)

// TestUnprivilegedNamespacesInTheBuiltToold: issue 24, item 5. The built
// toold, run as uid 1000 and as 65534, serves a command tool with
// containment namespaces: an unprivileged user namespace per run, set up
// by the shim. It failed with "fork/exec /proc/self/exe: permission
// denied" (toold is non-dumpable, so it could not write the child's
// uid_map), and toold did not start; the package tests passed because a
// test binary is not hardened. toold stays non-dumpable all the while.
func TestUnprivilegedNamespacesInTheBuiltToold(t *testing.T) {
	if os.Geteuid() != 0 {
		launchtest.NeedsRoot(t, "starts toold as other uids through setpriv")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		launchtest.Unavailable(t, "setpriv is not installed: cannot run toold as a non-root uid here")
	}
	bin, err := buildToold()
	if err != nil {
		t.Fatal(err)
	}
	for _, uid := range []int{1000, 65534} {
		t.Run(strconv.Itoa(uid), func(t *testing.T) {
			id := strconv.Itoa(uid)
			as := []string{setpriv, "--reuid", id, "--regid", id, "--clear-groups"}
			if out, err := exec.Command(as[0], append(as[1:], "unshare", "-U", "true")...).CombinedOutput(); err != nil {
				launchtest.Unavailable(t, "uid %d cannot make a user namespace here: %v %s", uid, err, out)
			}
			dir := launchtest.Workspace(t) // reachable by uid: the binary, the config, the state and the workspace
			exe := filepath.Join(dir, "toold")
			copyFile(t, bin, exe)
			cfg := filepath.Join(dir, "toold.yaml")
			ws := filepath.Join(dir, "ws")
			config := "workspace: " + ws + "\ncommands:\n  containment: namespaces\n  tools:\n" +
				"    - {name: whoami, description: who runs, argv: [sh, -c, 'echo uid $(id -u) in $(readlink /proc/self/ns/user)']}\n"
			for _, err := range []error{os.Mkdir(ws, 0o755), os.WriteFile(cfg, []byte(config), 0o644), chownTree(dir, uid)} {
				if err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command(as[0], append(as[1:], exe, "-config", cfg, "-listen", "127.0.0.1:0", "-admin-listen", "127.0.0.1:0",
				"-log-level", "warn", "-state-dir", filepath.Join(dir, "state"))...)
			cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "TMPDIR=/tmp"}
			cmd.Stderr = os.Stderr
			p := launchProcess(t, cmd)
			resp, err := http.Post(p.url+"/tools/whoami/execute", "application/json", strings.NewReader(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var env struct {
				Success bool
				Data    struct{ Stdout, Containment string }
				Error   any
			}
			if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
				t.Fatal(err)
			}
			if !env.Success || !strings.HasPrefix(env.Data.Stdout, "uid 0 in user:") || env.Data.Containment != "namespaces (unprivileged user namespace)" {
				t.Fatalf("as uid %d: %+v", uid, env)
			}
			own, _ := os.Readlink("/proc/self/ns/user")
			if strings.Contains(env.Data.Stdout, own) {
				t.Errorf("the command ran in toold's user namespace: %s", env.Data.Stdout)
			}
			// Still hardened: a non-dumpable process's /proc files are root's.
			var st syscall.Stat_t
			if err := syscall.Stat("/proc/"+strconv.Itoa(cmd.Process.Pid)+"/environ", &st); err != nil || st.Uid != 0 {
				t.Errorf("toold's /proc/PID/environ is uid %d's (%v): toold became dumpable", st.Uid, err)
			}
		})
	}
}

// chownTree gives dir and everything in it to uid (and its group).
func chownTree(dir string, uid int) error {
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
}
