// Package command provides toold's system_command tools: declarative
// command tools from the configuration, and execute_command, the general
// tool that runs a program of an allow-list.
//
// A command is always an argv, never a shell string, run by the launcher
// (internal/launch): its own process group, a clean environment, rlimits,
// capped and streamed output, and the containment the tool's sandbox
// names (none, namespaces, bwrap or auto; docs/security.md,
// "Containment"). Set.Describe says which each tool got and why.
//
// A command tool whose program is git runs with the repository's
// program-naming settings overridden (git.go); execute_command parses a
// caller's options with getopt_long's rules against the allow-list
// (getopt.go).
package command
