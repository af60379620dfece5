package launch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The minimal root of containment namespaces (toold root). The launcher
// thread builds it once, in its private mount namespace, and pivots into
// it: a tmpfs holding read-only binds of the system directories, a few
// files of /etc, a minimal /dev, a /proc with hidepid=2, and an empty /tmp.
// Nothing else of the host is there: not toold's configuration or state
// directory, not /run, /var or /home, not a host unix socket.
//
// Each run then gets a mount namespace of its own, made on the launcher
// thread just before the child is cloned (which shares it) and left right
// after: a fresh size-capped tmpfs on /tmp (/var/tmp and /dev/shm are links
// to it) and the run's own paths — the workspace, read-only unless the
// tool may write, its read_only_paths and the program when it lies outside
// the system directories — attached from detached mount trees (open_tree)
// that toold's side opened in the host's namespace. When the run's last
// process ends, its namespace and its /tmp go with it.

// etcFiles are the parts of /etc a command may need: users and groups,
// name resolution, the dynamic linker, time zone, certificates, and the
// alternatives links (awk, editor) Debian's /usr/bin points into.
var etcFiles = []string{"passwd", "group", "hosts", "host.conf", "resolv.conf", "nsswitch.conf",
	"services", "protocols", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone",
	"alternatives", "ssl", "ca-certificates", "ca-certificates.conf", "pki", "gitconfig",
	"mime.types", "os-release", "debian_version", "inputrc", "magic", "papersize"}

// devFiles are bound from the host's /dev.
var devFiles = []string{"null", "zero", "full", "random", "urandom", "tty"}

// rootTmpfsFlags are the flags of every tmpfs toold mounts for a command.
const rootTmpfsFlags = unix.MS_NOSUID | unix.MS_NODEV

// buildRoot makes the minimal root at a new directory of the host and
// pivots the calling thread into it. It runs on the launcher thread, in
// its private mount namespace, with toold's credentials. owner owns the
// root's directories, so that the thread, once it runs as the run-as uid,
// can make mount points for a run's paths.
func buildRoot(owner, group int) (hostDir string, err error) {
	hostDir, err = os.MkdirTemp("", "toold-root-")
	if err != nil {
		return "", err
	}
	return hostDir, buildRootAt(hostDir, owner, group)
}

// buildRootAt builds the minimal root on a tmpfs mounted at r and pivots
// into it.
func buildRootAt(r string, owner, group int) error {
	if err := unix.Mount("toold-root", r, "tmpfs", rootTmpfsFlags, "mode=0755,size=1m"); err != nil {
		return fmt.Errorf("mounting the root tmpfs: %w", err)
	}
	for _, d := range systemDirs {
		if d == "/etc" {
			continue
		}
		if err := mirror(d, r+d, true); err != nil {
			return err
		}
	}
	for _, d := range []string{"/etc", "/dev", "/proc", "/var"} {
		if err := os.Mkdir(r+d, 0o755); err != nil {
			return err
		}
	}
	for _, f := range etcFiles {
		if err := mirror("/etc/"+f, r+"/etc/"+f, false); err != nil {
			return err
		}
	}
	for _, f := range devFiles {
		if err := mirror("/dev/"+f, r+"/dev/"+f, false); err != nil {
			return err
		}
	}
	links := map[string]string{"/dev/fd": "/proc/self/fd", "/dev/stdin": "/proc/self/fd/0",
		"/dev/stdout": "/proc/self/fd/1", "/dev/stderr": "/proc/self/fd/2", "/dev/shm": "/tmp", "/var/tmp": "/tmp"}
	for name, target := range links {
		if err := os.Symlink(target, r+name); err != nil {
			return err
		}
	}
	if err := os.Mkdir(r+"/tmp", 0o1777); err != nil {
		return err
	}
	if err := unix.Mount("proc", r+"/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "hidepid=2"); err != nil {
		return fmt.Errorf("mounting /proc: %w", err)
	}
	if owner != os.Getuid() || group != os.Getgid() {
		if err := chownDirs(r, owner, group); err != nil {
			return err
		}
	}
	if err := unix.Chdir(r); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detaching the host's root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	// Read-only for every run: only this mount is, the tmpfs stays
	// writable for the mount points runs add in their own namespace.
	if err := unix.Mount("", "/", "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|rootTmpfsFlags, ""); err != nil {
		return fmt.Errorf("making the root read-only: %w", err)
	}
	return nil
}

// mirror makes dst show src read-only: a symlink is copied as a symlink
// when keepLinks (merged /usr), else followed; a missing src is skipped.
func mirror(src, dst string, keepLinks bool) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return nil //nolint:nilerr // not on this host: nothing to show
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		if keepLinks {
			target, err := os.Readlink(src)
			if err != nil {
				return err
			}
			return os.Symlink(target, dst)
		}
		if fi, err = os.Stat(src); err != nil {
			return nil //nolint:nilerr // a dangling link: nothing to show
		}
	}
	if fi.IsDir() {
		err = os.Mkdir(dst, 0o755)
	} else {
		err = os.WriteFile(dst, nil, 0o644)
	}
	if err != nil {
		return err
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("binding %s: %w", src, err)
	}
	return remountReadOnly(dst)
}

// remountReadOnly makes a bind mount read-only, keeping the locked flags
// of the original mount.
func remountReadOnly(path string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return err
	}
	keep := uintptr(st.Flags) & (unix.ST_NOSUID | unix.ST_NODEV | unix.ST_NOEXEC | unix.ST_NOATIME | unix.ST_NODIRATIME | unix.ST_RELATIME)
	if err := unix.Mount("", path, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|keep, ""); err != nil {
		return fmt.Errorf("making %s read-only: %w", path, err)
	}
	return nil
}

// chownDirs gives the root tmpfs's own directories (not what is bound
// into them) to uid:gid.
func chownDirs(root string, uid, gid int) error {
	for _, d := range []string{"", "/etc", "/dev", "/var"} {
		if err := os.Lchown(root+d, uid, gid); err != nil {
			return err
		}
	}
	return nil
}

// treeMount is one of a run's paths, as a detached mount tree.
type treeMount struct {
	fd   int
	path string
	dir  bool
}

// callMounts is what a run adds to the minimal root.
type callMounts struct {
	tmpSize int64 // the size of its /tmp
	trees   []treeMount
	// tmpMount, when not 0, is the run's /tmp made on toold's side
	// (newTmpfs), for a launcher thread that may not mount; else populate
	// mounts it.
	tmpMount int
}

// close closes the descriptors of the run's mounts, attached or not.
func (cm *callMounts) close() {
	closeTrees(cm.trees)
	if cm.tmpMount > 0 {
		_ = unix.Close(cm.tmpMount)
	}
}

// newTmpfs makes a detached tmpfs of size bytes (0: not capped), as the
// run's /tmp, with the new mount API.
func newTmpfs(size int64) (int, error) {
	fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return 0, fmt.Errorf("the run's /tmp: fsopen: %w", err)
	}
	defer unix.Close(fs)
	if err := unix.FsconfigSetString(fs, "mode", "1777"); err != nil {
		return 0, fmt.Errorf("the run's /tmp: %w", err)
	}
	if size > 0 {
		if err := unix.FsconfigSetString(fs, "size", strconv.FormatInt(size, 10)); err != nil {
			return 0, fmt.Errorf("the run's /tmp: size: %w", err)
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return 0, fmt.Errorf("the run's /tmp: %w", err)
	}
	m, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return 0, fmt.Errorf("the run's /tmp: fsmount: %w", err)
	}
	return m, nil
}

// openTrees clones the host paths a run needs as detached mount trees, in
// the host's mount namespace (the caller's). A path that does not exist is
// skipped; ro trees are made read-only (recursively).
func openTrees(paths []string, ro []bool) ([]treeMount, error) {
	var out []treeMount
	for i, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		fd, err := unix.OpenTree(unix.AT_FDCWD, p, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			closeTrees(out)
			return nil, fmt.Errorf("cloning the mount of %s: %w", p, err)
		}
		out = append(out, treeMount{fd: fd, path: p, dir: fi.IsDir()})
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
		if ro[i] {
			attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
		}
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
			closeTrees(out)
			return nil, fmt.Errorf("making %s read-only: %w", p, err)
		}
	}
	return out, nil
}

func closeTrees(ts []treeMount) {
	for _, t := range ts {
		_ = unix.Close(t.fd)
	}
}

// enterRun gives the launcher thread a new mount namespace for one run
// (a copy of the minimal root's) with the run's /tmp and paths. On error
// the thread is back in base.
func enterRun(base int, cm *callMounts) (err error) {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("the run's mount namespace: %w", err)
	}
	defer func() {
		if err != nil {
			_ = leaveRun(base)
		}
	}()
	return populate(cm)
}

// populate mounts the run's /tmp and attaches its paths, in the calling
// thread's mount namespace, under the minimal root.
func populate(cm *callMounts) error {
	opts := "mode=1777"
	if cm.tmpSize > 0 {
		opts += ",size=" + strconv.FormatInt(cm.tmpSize, 10)
	}
	if cm.tmpMount > 0 {
		if err := unix.MoveMount(cm.tmpMount, "", unix.AT_FDCWD, "/tmp", unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("attaching the run's /tmp: %w", err)
		}
	} else if err := unix.Mount("tmp", "/tmp", "tmpfs", rootTmpfsFlags, opts); err != nil {
		return fmt.Errorf("mounting the run's /tmp: %w", err)
	}
	opened := false
	for _, t := range cm.trees {
		if !opened && !strings.HasPrefix(t.path, "/tmp/") {
			// Mount points outside /tmp go into the root tmpfs, whose
			// mount is read-only: writable in this namespace only.
			if err := unix.MountSetattr(unix.AT_FDCWD, "/", 0, &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}); err != nil {
				return fmt.Errorf("opening the root for mount points: %w", err)
			}
			opened = true
		}
		if err := mountPoint(t.path, t.dir); err != nil {
			return fmt.Errorf("mount point %s: %w", t.path, err)
		}
		if err := unix.MoveMount(t.fd, "", unix.AT_FDCWD, t.path, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("attaching %s: %w", t.path, err)
		}
	}
	if opened {
		if err := unix.MountSetattr(unix.AT_FDCWD, "/", 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
			return fmt.Errorf("closing the root: %w", err)
		}
	}
	return nil
}

// mountPoint makes path (a directory, or a file for a file) and its
// parents where they are missing.
func mountPoint(path string, dir bool) error {
	if _, err := os.Lstat(path); err == nil {
		return nil
	}
	parent := path
	if !dir {
		parent = filepath.Dir(path)
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	if dir {
		return nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// leaveRunNS puts the thread back in the minimal root's namespace; the
// run's namespace lives on in its processes.
func leaveRunNS(base int) error {
	if err := unix.Setns(base, unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("leaving the run's mount namespace: %w", err)
	}
	return nil
}

// openOwnMountNS returns a descriptor of the thread's mount namespace.
func openOwnMountNS() (int, error) {
	fd, err := unix.Open("/proc/thread-self/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("opening the mount namespace: %w", errors.Join(err))
	}
	return fd, nil
}
