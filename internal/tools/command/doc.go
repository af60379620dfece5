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
// Containment, per tool:
//
//   - none: only the above. When toold is root, commands still run as the
//     run-as uid (65534), which makes the process-count limit hold. A
//     process that leaves the group (setsid) is found by its TOOLD_RUN_ID
//     variable and killed when the command is stopped; the network is not
//     isolated.
//   - namespaces (root): new PID, mount, IPC, UTS and (unless the tool
//     allows the network) network namespaces, the workspace read-only
//     unless the tool may write, /proc showing only the command's own uid,
//     and the run-as uid. The command is the init of its PID namespace, so
//     nothing it starts outlives it.
//   - bwrap (unprivileged hosts): bubblewrap with --unshare-all
//     --die-with-parent --new-session, read-only system directories, the
//     workspace read-write only if the tool allows, --share-net only if the
//     network is allowed.
//   - auto: namespaces when toold is root and they work, else bwrap when
//     it works, else none; Set.Describe says which and why.
//
// A command tool whose program is git runs with the repository's
// program-naming settings overridden (git.go); execute_command parses a
// caller's options with getopt_long's rules against the allow-list
// (getopt.go).
//
// How the per-command setup is done without a shim process is explained
// on the launcher type.
package command
