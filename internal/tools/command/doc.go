// Package command provides toold's system_command tools: declarative
// command tools from the configuration, and execute_command, the general
// tool that runs a program of an allow-list. Linux only.
//
// A command is always an argv, never a shell string. Every command runs
// in its own process group with a clean environment (an allow-list of
// toold's variables plus fixed values, TMPDIR and HOME pointing at a private
// temporary directory removed afterwards), under rlimits (CPU time, address
// space, file size, open files, processes), with stdout and stderr capped
// (the command is killed at the cap) and streamed through Call.Emit as
// valid UTF-8.
//
// Containment, per tool (docs/security.md, "Containment"):
//
//   - none (explicit only): only the above; every result says "none (not
//     isolated)". When toold is root, commands still run as the run-as uid
//     (65534). The network and the host's file system are not isolated.
//   - namespaces: new PID, IPC, UTS and (unless the tool allows the
//     network) network namespaces. As root, a minimal root (system
//     directories, a few files of /etc, the workspace read-only unless the
//     tool may write) with a size-capped tmpfs /tmp per run, and the run-as
//     uid. Not root, an unprivileged user namespace mapping toold's uid,
//     over the host's file system.
//   - bwrap: bubblewrap with --unshare-all --die-with-parent --new-session,
//     read-only system directories, the workspace read-write only if the
//     tool allows, --share-net only if the network is allowed.
//   - auto: namespaces when toold is root, else bwrap, else namespaces in
//     a user namespace; never none: without a sandbox the tool does not
//     start. Set.Describe says which and why.
//
// Every run also gets cgroups of its own when toold can make them (see
// cgroup.go): the limits on memory, processes and CPU then hold for the
// whole call, and everything the run started is killed when it ends.
//
// A command tool whose program is git runs with the repository's
// program-naming settings overridden (git.go); execute_command parses a
// caller's options with getopt_long's rules against the allow-list
// (getopt.go).
//
// How the per-command setup is done without a shim process is explained
// on the launcher type.
package command
