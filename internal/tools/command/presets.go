package command

import (
	"slices"
	"sort"

	"github.com/toold/toold/internal/ospath"
)

// programReads are the workspace files a program reads as code or as
// configuration that names programs, by the program's base name: a tool
// running it gets them in its executes without saying so (issue 24,
// finding 3: a make tool declared executes: [Makefile, "*.mk"] and make
// ran a GNUmakefile, which it prefers). The lists are what each program
// looks for by itself; a file named only inside another (make's
// `include config/rules`, an npm script's `node build.js`) is not known
// here: the operator adds it to executes.
var programReads = map[string][]string{
	// GNU make reads GNUmakefile, makefile, Makefile in that order; BSD
	// make BSDmakefile; *.mk and *.mak are the conventional includes.
	"make":  makeFiles,
	"gmake": makeFiles,
	"bmake": makeFiles,
	"npm":   npmFiles,
	"npx":   npmFiles,
	"pnpm":  append(slices.Clone(npmFiles), ".pnpmfile.cjs", "pnpm-workspace.yaml"),
	"yarn":  append(slices.Clone(npmFiles), ".yarnrc", ".yarnrc.yml", ".pnp.cjs", ".yarn/**"),
	// direnv sources .envrc (and, when enabled, .env) as shell.
	"direnv": {".envrc", ".env"},
	"just":   {"justfile", ".justfile", "Justfile", "*.just"},
	"rake":   {"Rakefile", "rakefile", "Rakefile.rb", "*.rake"},
	"cargo":  {".cargo/config", ".cargo/config.toml", "build.rs", "rust-toolchain", "rust-toolchain.toml"},
}

var (
	makeFiles = []string{"GNUmakefile", "makefile", "Makefile", "BSDmakefile", "*.mk", "*.mak"}
	npmFiles  = []string{"package.json", ".npmrc"}
)

// Executed is one workspace glob a command tool executes, and the tool.
type Executed struct {
	Glob string
	By   string
}

// Executed lists what every tool of c executes: each declared tool's
// executes and the files its program reads by itself (programReads), and
// for execute_command the files of every program it allows. cmd/toold
// hands them to the file tools, which refuse to write them.
func (c Config) Executed() []Executed {
	var out []Executed
	for _, t := range c.Tools {
		for _, g := range t.executedGlobs() {
			out = append(out, Executed{Glob: g, By: t.Name})
		}
	}
	if c.ExecuteCommand.Enabled {
		names := make([]string, 0, len(c.ExecuteCommand.Programs))
		for name, rule := range c.ExecuteCommand.Programs {
			names = append(names, name)
			if rule.Path != "" {
				names = append(names, rule.Path)
			}
		}
		sort.Strings(names)
		seen := map[string]bool{}
		for _, n := range names {
			for _, g := range programReads[ospath.Host().ProgramName(n)] {
				if !seen[g] {
					seen[g] = true
					out = append(out, Executed{Glob: g, By: ExecuteCommandName})
				}
			}
		}
	}
	return out
}

// executedGlobs are t's executes and its program's own files, once each.
func (t ToolConfig) executedGlobs() []string {
	out := slices.Clone(t.Executes)
	if len(t.Argv) > 0 {
		for _, g := range programReads[ospath.Host().ProgramName(t.Argv[0].Arg)] {
			if !slices.Contains(out, g) {
				out = append(out, g)
			}
		}
	}
	return out
}
