package launch

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// shape is one program toold starts, as the examples declare it.
type shape struct {
	name     string
	sandbox  Sandbox
	runner   bool   // not a command tool: no CPU-time or address-space limit unless set
	darwin   string // the program's real path on a Mac
	defaults Rlimits
}

// exampleShapes are the command tools of examples/commands.yaml, the stdio
// MCP servers of examples/mcp.yaml and a consultation CLI of
// examples/consult.yaml, read from those files: the golden files change
// when the examples do.
func exampleShapes(t *testing.T) []shape {
	t.Helper()
	var cmds struct {
		Commands struct {
			Rlimits Rlimits `yaml:"rlimits"`
			Tools   []struct {
				Name    string  `yaml:"name"`
				Argv    []any   `yaml:"argv"`
				Sandbox Sandbox `yaml:"sandbox"`
			} `yaml:"tools"`
		} `yaml:"commands"`
	}
	var mcp struct {
		MCP struct {
			Servers []struct {
				Name    string  `yaml:"name"`
				Command string  `yaml:"command"`
				Sandbox Sandbox `yaml:"sandbox"`
			} `yaml:"servers"`
		} `yaml:"mcp"`
	}
	var consult struct {
		Consult struct {
			Providers map[string]struct {
				Sandbox Sandbox `yaml:"sandbox"`
			} `yaml:"providers"`
		} `yaml:"consult"`
	}
	readYAML(t, "commands.yaml", &cmds)
	readYAML(t, "mcp.yaml", &mcp)
	readYAML(t, "consult.yaml", &consult)
	programs := map[string]string{"git": "/usr/bin/git", "go": "/usr/local/go/bin/go", "node": "/opt/homebrew/bin/node"}
	var out []shape
	for _, c := range cmds.Commands.Tools {
		prog, _ := c.Argv[0].(string)
		out = append(out, shape{name: "command_" + c.Name, sandbox: c.Sandbox, darwin: programs[prog], defaults: cmds.Commands.Rlimits})
	}
	for _, s := range mcp.MCP.Servers {
		if s.Command != "" {
			out = append(out, shape{name: "mcp_" + s.Name, sandbox: s.Sandbox, runner: true, darwin: programs[s.Command]})
		}
	}
	cli, ok := consult.Consult.Providers["claude"]
	if !ok || len(cmds.Commands.Tools) == 0 || len(mcp.MCP.Servers) == 0 {
		t.Fatal("the examples no longer have the shapes this test reads (command tools, MCP servers, the claude CLI)")
	}
	on := true // a consultation CLI has the network unless its sandbox says otherwise
	if cli.Sandbox.Network == nil {
		cli.Sandbox.Network = &on
	}
	out = append(out, shape{name: "consult_claude", sandbox: cli.Sandbox, runner: true, darwin: "/Users/dev/.local/bin/claude"})
	return out
}

func readYAML(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// resolved is s as Launcher.sandbox resolves it in mode, with toold's own
// files private.
func (s shape) resolved(mode Mode, private []string) *sandbox {
	c := s.sandbox
	if s.runner {
		c.Rlimits = c.Rlimits.unboundedUnlessSet()
	}
	return &sandbox{mode: mode, network: c.networkOn(), writable: c.WorkspaceWritable, roPaths: c.ReadOnlyPaths,
		private: private, lim: c.Rlimits.merge(s.defaults).merge(defaultRlimits())}
}

// checkGolden compares got with testdata/name, or rewrites it with -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to write it)", err, t.Name())
	}
	if string(want) != got {
		t.Errorf("%s differs from what the code makes now (go test -run %s -update rewrites it):\n%s", path, t.Name(), got)
	}
}

// The paths of a Mac and of a Windows machine the golden files are made for.
const (
	macWorkspace = "/Users/dev/src/project"
	macTmp       = "/private/var/folders/x1/abc/T/toold-command-1/run-1"
	winWorkspace = `C:\Users\dev\src\project`
	winTmp       = `C:\Users\dev\AppData\Local\Temp\toold-command-1\run-1`
	winCPUs      = 8
)

var (
	macPrivate = []string{"/Users/dev/Library/Application Support/toold/project-3f2c9a1b7d0e", "/Users/dev/.config/toold/toold.yaml"}
	winPrivate = []string{`C:\Users\dev\AppData\Local\toold\project-3f2c9a1b7d0e`, `C:\Users\dev\toold.yaml`}
)

// TestSeatbeltProfiles pins the Seatbelt profile (and its parameters) a
// run of each example shape gets on a Mac, and checks what each must hold
// whatever the golden file says.
func TestSeatbeltProfiles(t *testing.T) {
	for _, s := range exampleShapes(t) {
		t.Run(s.name, func(t *testing.T) {
			sb := s.resolved(ModeSeatbelt, macPrivate)
			p := sb.seatbeltPolicy(s.darwin, macWorkspace, macTmp, func(p string) string { return p })
			profile, params := seatbeltProfile(p)
			var b strings.Builder
			b.WriteString(profile + "\n; sandbox-exec parameters\n")
			for _, kv := range params {
				b.WriteString("; -D" + kv[0] + "=" + kv[1] + "\n")
			}
			checkGolden(t, filepath.Join("seatbelt", s.name+".golden"), b.String())
			checkSeatbelt(t, sb, profile, params)
		})
	}
}

// checkSeatbelt: deny by default; no path spliced into the text; writes to
// the workspace iff writable, the network iff allowed (and then not
// loopback); .git never writable; toold's own files denied last.
func checkSeatbelt(t *testing.T, sb *sandbox, profile string, params [][2]string) {
	t.Helper()
	for _, kv := range params {
		if strings.Contains(profile, kv[1]) {
			t.Errorf("the path %s is in the profile's text, not only a parameter", kv[1])
		}
	}
	has := func(s string) bool { return strings.Contains(profile, s) }
	if !has("(deny default)") || has("(allow default)") || has("(allow file-read*)\n") || has("(allow file-write*)\n") {
		t.Error("the profile does not deny by default")
	}
	if has(`(allow file-write* (subpath (param "WORKSPACE")))`) != sb.writable {
		t.Errorf("workspace writes allowed: %v, want %v", !sb.writable, sb.writable)
	}
	if has("(allow network*") != sb.network || (sb.network && !has(`(deny network-outbound (remote ip "localhost:*"))`)) {
		t.Errorf("network: want %v, and never loopback", sb.network)
	}
	gitDeny := strings.Index(profile, `(regex #"/\.[Gg][Ii][Tt](/.*)?$")`)
	if gitDeny < 0 || gitDeny < strings.LastIndex(profile, "(allow file-write*") {
		t.Error(".git is not denied after every write allow")
	}
	last := strings.LastIndex(profile, "(deny file-read* file-write*")
	if last < 0 || strings.Contains(profile[last:], "(allow") {
		t.Error("toold's own files are not denied after every allow")
	}
}

// TestJobPlans pins the Job Object, token and labels a run of each example
// shape gets on Windows, and checks what each must hold.
func TestJobPlans(t *testing.T) {
	for _, s := range exampleShapes(t) {
		t.Run(s.name, func(t *testing.T) {
			sb := s.resolved(ModeJob, winPrivate)
			p := sb.jobPlanFor(winWorkspace, winTmp, winCPUs)
			checkGolden(t, filepath.Join("job", s.name+".golden"), p.String())
			labels := map[string]string{}
			for _, l := range p.Labels {
				labels[l.Path] = l.SDDL
			}
			if labels[winTmp] != labelLowWritable || p.Integrity != "low" {
				t.Errorf("the run cannot write its TEMP (labels %v, integrity %s)", labels, p.Integrity)
			}
			if _, ok := labels[winWorkspace]; ok != sb.writable {
				t.Errorf("workspace labelled writable: %v, want %v", ok, sb.writable)
			}
			if sb.writable && labels[winWorkspace+`\.git`] != labelMediumNoLow {
				t.Error("a writable workspace's .git is not kept from low integrity")
			}
			for _, f := range winPrivate {
				if labels[f] != labelMediumSealed {
					t.Errorf("%s is not sealed from the run", f)
				}
			}
			if p.ActiveProcesses != sb.lim.Processes || p.JobMemory != sb.lim.Memory || p.CPURate == 0 {
				t.Errorf("limits %+v from %+v", p, sb.lim)
			}
			if !strings.Contains(p.String(), "network: not isolated") {
				t.Error("the plan does not say the network is not isolated")
			}
		})
	}
}

// TestJobSaysNetworkNotIsolated: every result of a job run without the
// network says it was not taken away (a Job Object cannot), and so does
// discovery's description.
func TestJobSaysNetworkNotIsolated(t *testing.T) {
	sb := &sandbox{mode: ModeJob}
	if !strings.Contains(sb.short(), "network NOT isolated") || !strings.Contains(sb.describe(), "network NOT isolated") {
		t.Errorf("short %q, describe %q", sb.short(), sb.describe())
	}
	sb.network = true
	if sb.short() != "job" {
		t.Errorf("short %q with the network allowed", sb.short())
	}
}
