package launch

import (
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSyscallFilter: issue 24, finding 8. Inside a namespaces or bwrap
// run, `unshare -Urm true` made a nested user namespace with every
// capability, and mounts in it. With the filter (the default) it fails,
// and so do the other denied calls a shell can reach; the run itself
// works, forks (clone without CLONE_NEWUSER) and says the filter in its
// limits. With seccomp: false no filter is installed, a nested user
// namespace is made again (as on the code before the filter), and the
// result says that no filter held.
func TestSyscallFilter(t *testing.T) {
	off := false
	for _, m := range []Mode{ModeNamespaces, ModeBwrap} {
		t.Run(string(m), func(t *testing.T) {
			r := sandboxed(t, m, Config{}, Sandbox{})
			for _, argv := range [][]string{
				{"unshare", "-Urm", "true"},
				{"unshare", "-U", "true"},
				{"unshare", "-m", "true"},
				{"sh", "-c", "exec unshare -Ur sh -c 'mount -t tmpfs none /tmp'"},
			} {
				res, err := runFor(t, r, 20*time.Second, append([]string{"/usr/bin/env"}, argv...)...)
				if err != nil {
					t.Fatal(err)
				}
				if res.OK || !strings.Contains(res.Stderr, "unshare failed: Operation not permitted") {
					t.Errorf("%q ran inside a %s run: ok %v, stderr %q", argv, m, res.OK, res.Stderr)
				}
			}
			res, err := runFor(t, r, 20*time.Second, "/bin/sh", "-c", "echo $(echo forked) && cat /proc/self/status | grep ^Seccomp:")
			if err != nil {
				t.Fatal(err)
			}
			if !res.OK || !strings.Contains(res.Stdout, "forked") || !strings.Contains(res.Stdout, "Seccomp:\t2") {
				t.Errorf("a filtered run: ok %v, stdout %q, stderr %q", res.OK, res.Stdout, res.Stderr)
			}
			if !strings.HasPrefix(res.Limits["syscalls"], "seccomp: nested user namespaces") {
				t.Errorf("limits say %q", res.Limits["syscalls"])
			}

			r = sandboxed(t, m, Config{}, Sandbox{Seccomp: &off})
			res, err = runFor(t, r, 20*time.Second, "/bin/sh", "-c", "grep ^Seccomp: /proc/self/status; unshare -U true")
			if err != nil {
				t.Fatal(err)
			}
			if !res.OK || !strings.Contains(res.Stdout, "Seccomp:\t0") || res.Limits["syscalls"] != "not filtered (seccomp: false)" {
				t.Errorf("seccomp: false: ok %v, stdout %q, stderr %q, limits say %q", res.OK, res.Stdout, res.Stderr, res.Limits["syscalls"])
			}
		})
	}
}

// TestFilterProgram: every jump of the program lands inside it, the
// thread's variant lets the launcher thread make a run's namespace, and
// the program for this architecture is what bwrap reads.
func TestFilterProgram(t *testing.T) {
	for _, thread := range []bool{false, true} {
		prog, err := filterProgram(thread)
		if err != nil {
			t.Fatal(err)
		}
		for i, in := range prog {
			if in.Code&0x07 == unix.BPF_JMP && (i+1+int(in.Jt) >= len(prog) || i+1+int(in.Jf) >= len(prog)) {
				t.Errorf("instruction %d jumps out of the program", i)
			}
		}
		denied := filterDenied(thread)
		for _, nr := range []uint32{unix.SYS_SETNS, unix.SYS_MOVE_MOUNT, unix.SYS_MOUNT_SETATTR} {
			has := false
			for _, d := range denied {
				has = has || d == nr
			}
			if has == thread {
				t.Errorf("thread %v: syscall %d denied %v", thread, nr, has)
			}
		}
	}
	f, err := filterPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var buf [4096]byte
	n, _ := f.Read(buf[:])
	prog, _ := filterProgram(false)
	if n != 8*len(prog) {
		t.Errorf("the pipe holds %d bytes for %d instructions", n, len(prog))
	}
}
