package command

import (
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/toold/toold/internal/ospath"
)

// Git reads programs to run from the repository it works in: .git/config
// names an fsmonitor, hooks, an ssh command, a pager, credential helpers,
// gpg; attributes name diff drivers and textconv filters defined there.
// A command tool running git over the workspace would run whatever the
// repository says — a git_status declared read-only included — so every
// command tool whose program is git gets, from toold itself (not from the
// example configuration), the repository's executable settings overridden
// on its command line, which wins over every config file, and git's
// system and global configuration switched off. An operator's own env of
// the tool still wins over the variables below.

// isGit reports whether the program (an absolute path) is git: on Windows
// git.exe, on macOS /usr/local/bin/Git too (ospath.ProgramName).
func isGit(program string) bool { return ospath.Host().ProgramName(program) == "git" }

// gitGuards are put right after git's path. safe.directory names the
// workspace (and, for git 2.46 and later, repositories below it): commands
// run as another uid than the repository's owner, and only command-line
// (protected) configuration may say so, never the repository.
func gitGuards(workspace string) []string {
	settings := []string{
		"core.fsmonitor=false",
		"core.hooksPath=/dev/null",
		"core.sshCommand=false",
		"core.askPass=false",
		"core.editor=false",
		"sequence.editor=false",
		"core.pager=cat",
		"credential.helper=", // empty resets the list
		"gpg.program=false",
		"gpg.ssh.program=false",
		"gpg.x509.program=false",
		"log.showSignature=false",
		"protocol.ext.allow=never",
		"safe.bareRepository=explicit", // written files cannot make the workspace a bare repository
		"safe.directory=" + workspace,
		"safe.directory=" + filepath.Join(workspace, "*"),
	}
	out := make([]string, 0, 2*len(settings))
	for _, s := range settings {
		out = append(out, "-c", s)
	}
	return out
}

// gitEnv are the variables every git command tool gets unless its own env
// sets them: no system or global configuration (toold's host's, not the
// operator's intent for these tools), no prompts, no pager. Discovery may
// still find a repository above the workspace: the model cannot write
// there, and a workspace may well be a directory of a larger repository.
func gitEnv(workspace string, env map[string]string) map[string]string {
	out := maps.Clone(env)
	if out == nil {
		out = map[string]string{}
	}
	for k, v := range map[string]string{
		"GIT_CONFIG_NOSYSTEM": "1",
		"GIT_CONFIG_GLOBAL":   "/dev/null",
		"GIT_ATTR_NOSYSTEM":   "1",
		"GIT_TERMINAL_PROMPT": "0",
		"GIT_PAGER":           "cat",
	} {
		if _, set := out[k]; !set {
			out[k] = v
		}
	}
	return out
}

// gitDriverGuards switches off the drivers attributes name for
// subcommands that run them by default: external diff programs and
// textconv filters.
var gitDriverGuards = map[string][]string{
	"diff":        {"--no-ext-diff", "--no-textconv"},
	"log":         {"--no-ext-diff", "--no-textconv"},
	"show":        {"--no-ext-diff", "--no-textconv"},
	"whatchanged": {"--no-ext-diff", "--no-textconv"},
	"blame":       {"--no-textconv"},
	"annotate":    {"--no-textconv"},
}

// gitValueOptions are git's global options that take the next argument
// as their value.
var gitValueOptions = []string{"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env", "--super-prefix", "--attr-source"}

// aliasName is what git accepts as an alias's name (a config key part).
var aliasName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]*$`)

// guardedGit is guardGit for a run of program (git) in cwd, relative to
// the workspace: the directory is confined first (Launcher.ResolveDir),
// since the guard reads the repository's config from it and nothing
// outside the workspace is to be read.
func (s *Set) guardedGit(program, cwd string, args []string) ([]string, error) {
	dir, err := s.l.ResolveDir(cwd)
	if err != nil {
		return nil, toolError(program, err)
	}
	return guardGit(s.l.Workspace(), dir, args)
}

// guardGit returns git's arguments (after the program) with the guards
// right before the subcommand, past git's global options (-C and -c take
// a value), so they come after, and win over, any -c a caller could pass;
// and the driver guards right after the subcommand. Without a subcommand
// (git --version) the guards go first. dir is the run's directory as
// Launcher.ResolveDir confined it (absolute, inside the workspace): the
// repository git will use there names the filter and merge drivers
// switched off (gitdrivers.go).
func guardGit(workspace, dir string, args []string) ([]string, error) {
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if slices.Contains(gitValueOptions, a) {
			i++
			continue
		}
		if !strings.HasPrefix(a, "-") {
			break
		}
	}
	i = min(i, len(args))
	drivers, err := gitDriverSettings(dir, args[:i])
	if err != nil {
		return nil, err
	}
	guards := append(gitGuards(workspace), drivers...)
	if i == len(args) {
		return append(guards, args...), nil
	}
	out := append(slices.Clone(args[:i]), guards...)
	sub := args[i]
	// A subcommand that is not one of git's own may be an alias the
	// repository defines ("!cmd" runs cmd): an empty alias makes git
	// refuse instead. git never reads an alias of a built-in.
	if aliasName.MatchString(sub) {
		out = append(out, "-c", "alias."+sub+"=")
	}
	out = append(append(out, sub), gitDriverGuards[sub]...)
	return append(out, args[i+1:]...), nil
}
