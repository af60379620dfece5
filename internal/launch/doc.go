// Package launch starts every program toold runs — command tools, stdio
// MCP servers, consultation CLIs — in one sandbox. Linux, macOS and Windows
// each have sandboxes of their own below one portable API (platform.go is
// the seam; README.md has the table of what each OS provides, and
// docs/security.md, "Containment", what each mode holds).
//
// A program is always an argv, never a shell string. Every program runs
// in its own process group (Windows: its own Job Object) with a clean
// environment (an allow-list of toold's variables plus fixed values,
// TMPDIR and HOME pointing at a private temporary directory removed
// afterwards), under per-process limits (Linux and macOS: rlimits for CPU
// time, address space (Linux), file size, open files, processes; Windows:
// the job's), with stdout and stderr capped (the program is killed at the
// cap) and streamed as valid UTF-8.
//
// Containment, per sandbox:
//
//   - none (explicit only, every OS): only the above; every result says
//     "none (not isolated)". When toold is root, programs still run as the
//     run-as uid (65534). The network and the host's file system are not
//     isolated.
//   - namespaces (Linux): new PID, IPC, UTS and (unless the sandbox allows
//     the network) network namespaces. As root, a minimal root (system
//     directories, a few files of /etc, the workspace read-only unless the
//     sandbox may write) with a size-capped tmpfs /tmp per run, and the
//     run-as uid (launcher_linux.go, root_linux.go). Not root, an
//     unprivileged user namespace mapping toold's uid, with the same
//     minimal root built by toold's own binary re-run as a shim
//     (shim_linux.go).
//   - bwrap (Linux): bubblewrap with --unshare-all --die-with-parent
//     --new-session, read-only system directories, the workspace
//     read-write only if the sandbox allows, --share-net only if the
//     network is allowed (contain_linux.go).
//   - seatbelt (macOS): sandbox-exec with a profile made per run that
//     denies by default, toold's ports included (seatbelt.go,
//     platform_darwin.go, shim_darwin.go).
//   - job (Windows): an AppContainer per run, created inside a Job Object
//     of its own (job.go, platform_windows.go, job_windows.go,
//     appcontainer_windows.go).
//   - auto: the strongest sandbox the machine has — on Linux namespaces
//     when toold is root, else bwrap, else namespaces in a user namespace;
//     on macOS seatbelt where sandbox-exec works; on Windows job where a
//     probe AppContainer starts — and never none: without a sandbox the
//     program does not start. Runner.Containment says which and why.
//
// The macOS and Windows sandboxes are built by pure functions tested on
// Linux; what has run on a real machine is in README.md and
// docs/security.md.
//
// On Linux, namespaces and bwrap runs also get a seccomp filter
// (seccomp_linux.go: nested user namespaces, mounts, bpf, io_uring and
// every socket but unix, TCP, UDP and netlink's route family denied), and
// once toold's listeners are bound, Launcher.ProtectPorts takes their ports
// from every run, whatever its network (ports_linux.go: Landlock, with the
// filter's socket rules so that no stream socket but TCP goes around it).
// Every run gets cgroups of its own when toold can make them
// (cgroup_linux.go): the limits on memory, processes and CPU then hold for
// the whole run, and everything the run started is killed when it ends.
//
// How the per-run setup is done without a shim process as root is
// explained on the launcher type (launcher_linux.go).
package launch
