// Package launch starts every program toold runs — command tools, stdio
// MCP servers, consultation CLIs — in one sandbox. Linux has every mode
// below; on macOS and Windows only an explicit none runs for now, and auto
// refuses (platform.go describes the seam their sandboxes plug into).
//
// A program is always an argv, never a shell string. Every program runs
// in its own process group with a clean environment (an allow-list of
// toold's variables plus fixed values, TMPDIR and HOME pointing at a private
// temporary directory removed afterwards), under rlimits (CPU time, address
// space, file size, open files, processes), with stdout and stderr capped
// (the program is killed at the cap) and streamed as valid UTF-8.
//
// Containment, per sandbox (docs/security.md, "Containment"):
//
//   - none (explicit only): only the above; every result says "none (not
//     isolated)". When toold is root, programs still run as the run-as uid
//     (65534). The network and the host's file system are not isolated.
//   - namespaces: new PID, IPC, UTS and (unless the sandbox allows the
//     network) network namespaces. As root, a minimal root (system
//     directories, a few files of /etc, the workspace read-only unless the
//     sandbox may write) with a size-capped tmpfs /tmp per run, and the
//     run-as uid. Not root, an unprivileged user namespace mapping toold's
//     uid, with the same minimal root built by a shim (shim.go).
//   - bwrap: bubblewrap with --unshare-all --die-with-parent --new-session,
//     read-only system directories, the workspace read-write only if the
//     sandbox allows, --share-net only if the network is allowed.
//   - auto: namespaces when toold is root, else bwrap, else namespaces in
//     a user namespace; never none: without a sandbox the program does not
//     start. Runner.Containment says which and why.
//
// Every run also gets cgroups of its own when toold can make them (see
// cgroup.go): the limits on memory, processes and CPU then hold for the
// whole run, and everything the run started is killed when it ends.
//
// How the per-run setup is done without a shim process is explained on
// the launcher type (launcher.go).
package launch
