package command

import (
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/toold/toold/internal/ospath"
	"github.com/toold/toold/internal/tools"
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

// GitConfig is what a command tool whose program is git may do beyond
// the guards (the `git:` key of a declared tool, or of execute_command's
// rule for git).
type GitConfig struct {
	// Submodules lets git enter the repository's submodules (git status
	// looking into them, --recurse-submodules, git submodule). Off by
	// default: toold tells git to ignore every submodule and refuses the
	// options and the subcommand that enter them. Either way nothing a
	// submodule's configuration defines runs (gitdrivers.go).
	Submodules bool `yaml:"submodules"`
}

// gitGuards are put right after git's path. safe.directory names the
// workspace (and, for git 2.46 and later, repositories below it): commands
// run as another uid than the repository's owner, and only command-line
// (protected) configuration may say so, never the repository. They are
// settings, not names: git passes them on to the git processes it starts
// (in a submodule too), and each switches off one kind of program a
// repository's configuration can name, whatever it is called.
func gitGuards(workspace string, opts GitConfig) []string {
	settings := []string{
		"core.fsmonitor=false",
		"core.hooksPath=/dev/null",
		"core.sshCommand=false",
		"core.askPass=false",
		"core.editor=false",
		"sequence.editor=false",
		"core.pager=cat",
		"core.alternateRefsCommand=", // empty: git's own for-each-ref
		"credential.helper=",         // empty resets the list
		"diff.external=true",         // --no-ext-diff where a subcommand would use it; elsewhere an empty diff
		"interactive.diffFilter=",
		"gpg.program=false",
		"gpg.ssh.program=false",
		"gpg.x509.program=false",
		"gpg.ssh.defaultKeyCommand=false",
		"log.showSignature=false",
		// Transports: https, http and ssh (whose program is sshCommand's,
		// off, unless the tool's env sets GIT_SSH_COMMAND) and nothing
		// else: file runs the repository's remote.<name>.uploadpack here,
		// git goes through core.gitProxy (the first one set wins, so the
		// repository's), ext runs any command.
		"protocol.allow=never",
		"protocol.https.allow=always",
		"protocol.http.allow=always",
		"protocol.ssh.allow=always",
		"protocol.file.allow=never",
		"protocol.git.allow=never",
		"protocol.ext.allow=never",
		"safe.bareRepository=explicit", // written files cannot make the workspace a bare repository
		"safe.directory=" + workspace,
		"safe.directory=" + filepath.Join(workspace, "*"),
	}
	if !opts.Submodules {
		settings = append(settings,
			"submodule.recurse=false",
			"diff.ignoreSubmodules=all", // each submodule's own ignore is set too (gitdrivers.go)
			"status.submoduleSummary=false",
			"fetch.recurseSubmodules=false",
			"push.recurseSubmodules=no",
		)
	}
	out := make([]string, 0, 2*len(settings))
	for _, s := range settings {
		out = append(out, "-c", s)
	}
	return out
}

// gitSubmoduleOptions enter submodules: refused unless the tool's git
// config enables them. An option is matched by any prefix of its name git
// would take for it (git's option parser takes an unambiguous
// abbreviation), with a value where one is allowed.
var gitSubmoduleOptions = []string{"--recurse-submodules", "--recursive", "--remote-submodules", "--submodule"}

// entersSubmodules says whether a git argument enters submodules:
// --recurse-submodules (or an abbreviation), --recursive (clone),
// --submodule=diff, --ignore-submodules with a value other than all.
func entersSubmodules(arg string) bool {
	name, value, hasValue := strings.Cut(arg, "=")
	if len(name) < 4 || !strings.HasPrefix(name, "--") {
		return false
	}
	if strings.HasPrefix("--ignore-submodules", name) && len(name) > len("--ig") {
		return hasValue && value != "all"
	}
	for _, o := range gitSubmoduleOptions {
		if strings.HasPrefix(o, name) {
			return !(o == "--submodule" && hasValue && value != "diff")
		}
	}
	return false
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
		"GIT_PROXY_COMMAND":   "", // set, even empty, it wins over core.gitProxy
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
func (s *Set) guardedGit(program, cwd string, args []string, opts GitConfig) ([]string, error) {
	dir, err := s.l.ResolveDir(cwd)
	if err != nil {
		return nil, toolError(program, err)
	}
	return guardGit(s.l.Workspace(), dir, args, opts)
}

// guardGit returns git's arguments (after the program) with the guards
// right before the subcommand, past git's global options (-C and -c take
// a value), so they come after, and win over, any -c a caller could pass;
// and the driver guards right after the subcommand. Without a subcommand
// (git --version) the guards go first. dir is the run's directory as
// Launcher.ResolveDir confined it (absolute, inside the workspace): the
// repositories git may read from there name the drivers switched off
// (gitdrivers.go). Unless opts enables submodules, a call that would
// enter them is refused.
func guardGit(workspace, dir string, args []string, opts GitConfig) ([]string, error) {
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
	if !opts.Submodules {
		if err := refuseSubmodules(args, i); err != nil {
			return nil, err
		}
	}
	drivers, err := gitSettings(workspace, dir, args[:i], opts.Submodules)
	if err != nil {
		return nil, err
	}
	guards := append(gitGuards(workspace, opts), drivers...)
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

// refuseSubmodules refuses git's submodule subcommand (args[sub]) and the
// options before "--" that enter submodules.
func refuseSubmodules(args []string, sub int) error {
	if sub < len(args) && args[sub] == "submodule" {
		return tools.Errorf(tools.PermissionError, "this tool may not enter submodules: git submodule is refused").
			WithSuggestion("an operator enables submodules with git: {submodules: true} on the tool")
	}
	for _, a := range args[min(sub+1, len(args)):] {
		if a == "--" {
			break
		}
		if entersSubmodules(a) {
			return tools.Errorf(tools.PermissionError, "this tool may not enter submodules: %s is refused", a).
				WithSuggestion("an operator enables submodules with git: {submodules: true} on the tool")
		}
	}
	return nil
}
