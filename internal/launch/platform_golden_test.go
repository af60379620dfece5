package launch

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/toold/toold/internal/egress"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// shape is one program toold starts, as the examples declare it (and a
// few the examples do not have: a networked run with a unix socket, a
// writable git run, containment none).
type shape struct {
	name     string
	sandbox  Sandbox
	runner   bool     // not a command tool: no CPU-time or address-space limit unless set
	argv     []string // the program's name, then its literal arguments
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
				Name    string   `yaml:"name"`
				Command string   `yaml:"command"`
				Args    []string `yaml:"args"`
				Sandbox Sandbox  `yaml:"sandbox"`
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
	var out []shape
	for _, c := range cmds.Commands.Tools {
		var argv []string
		for _, a := range c.Argv {
			if s, ok := a.(string); ok {
				argv = append(argv, s)
			} else {
				argv = append(argv, "{…}") // a templated argument
			}
		}
		out = append(out, shape{name: "command_" + c.Name, sandbox: c.Sandbox, argv: argv, defaults: cmds.Commands.Rlimits})
	}
	for _, s := range mcp.MCP.Servers {
		if s.Command != "" {
			out = append(out, shape{name: "mcp_" + s.Name, sandbox: s.Sandbox, runner: true, argv: append([]string{s.Command}, s.Args...)})
		}
	}
	cli, ok := consult.Consult.Providers["claude"]
	if !ok || len(cmds.Commands.Tools) == 0 || len(mcp.MCP.Servers) == 0 {
		t.Fatal("the examples no longer have the shapes this test reads (command tools, MCP servers, the claude CLI)")
	}
	if cli.Sandbox.Network == nil {
		cli.Sandbox.Network = NetworkOn()
	}
	out = append(out, shape{name: "consult_claude", sandbox: cli.Sandbox, runner: true, argv: []string{"claude", "-p"}})
	// Shapes the examples lack, declared as a configuration would.
	out = append(out,
		shape{name: "extra_network_socket", argv: []string{"ssh-add", "-l"}, sandbox: Sandbox{Network: NetworkOn(),
			UnixSockets: []string{"/Users/dev/.ssh/agent.sock"}}},
		shape{name: "extra_git_writable", argv: []string{"git", "commit"}, sandbox: Sandbox{WorkspaceWritable: true}},
		shape{name: "extra_none", argv: []string{"git", "status"}, sandbox: Sandbox{Containment: string(ModeNone), Network: NetworkOn()}},
	)
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

// targetLauncher is a Launcher whose host is described as another OS's
// (its rlimits' numbers, a user who is not root, no cgroups), so that
// Launcher.build — the code that builds every sandbox toold runs — builds
// here what it builds there.
func targetLauncher(t *testing.T, rl rlimitTable, private []string) *Launcher {
	t.Helper()
	l, err := New(Config{Private: private}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	l.host.rl, l.host.root = rl, false
	l.host.cgOnce.Do(func() {}) // no cgroups on a Mac or a Windows machine
	return l
}

// built is s's sandbox as toold builds it (Launcher.build) in mode, or
// the mode s itself names.
func (s shape) built(t *testing.T, l *Launcher, mode Mode) *sandbox {
	t.Helper()
	c := s.sandbox
	if s.runner {
		c.Rlimits = c.Rlimits.unboundedUnlessSet()
	}
	c.Rlimits = c.Rlimits.merge(s.defaults)
	if c.Containment != "" {
		mode = Mode(c.Containment)
	}
	sb, err := l.build(c, mode, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	return sb
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

// The paths of a Mac and of a Windows machine the golden files are made
// for, and toold's ports there (its API, its admin listener, the embedded
// store's).
const (
	macWorkspace = "/Users/dev/src/project"
	macTmp       = "/private/var/folders/x1/abc/T/toold-command-1/run-1"
	macShim      = "/opt/homebrew/bin/toold"
	winWorkspace = `C:\Users\dev\src\project`
	winTmp       = `C:\Users\dev\AppData\Local\Temp\toold-command-1\run-1`
	winCPUs      = 8
	winRunID     = "0123456789abcdef01234567"
)

var (
	macPrivate = []string{"/Users/dev/Library/Application Support/toold/project-3f2c9a1b7d0e", "/Users/dev/.config/toold/toold.yaml"}
	winPrivate = []string{`C:\Users\dev\AppData\Local\toold\project-3f2c9a1b7d0e`, winWorkspace + `\toold.yaml`}
	winSystem  = []string{`C:\Windows`, `C:\Program Files`, `C:\Program Files (x86)`}
	tooldPorts = []int{8080, 9090, 4222}
	macProgram = map[string]string{"git": "/usr/bin/git", "go": "/usr/local/go/bin/go", "node": "/opt/homebrew/bin/node",
		"claude": "/Users/dev/.local/bin/claude", "ssh-add": "/usr/bin/ssh-add"}
	winProgram = map[string]string{"git": `C:\Program Files\Git\cmd\git.exe`, "go": `C:\Program Files\Go\bin\go.exe`,
		"node": `C:\Program Files\nodejs\node.exe`, "claude": `C:\Users\dev\.local\bin\claude.exe`,
		"ssh-add": `C:\Windows\System32\OpenSSH\ssh-add.exe`}
)

// TestSeatbeltProfiles pins what a run of each shape starts on a Mac — the
// whole argv: toold's rlimit shim and its limits, sandbox-exec, the
// profile, its -D parameters, the program — as toold builds it
// (Launcher.build, then seatbeltRun, which platform_darwin.go's command
// calls), checks that every profile parses (readSBPL), and what each must
// hold whatever the golden file says.
func TestSeatbeltProfiles(t *testing.T) {
	l := targetLauncher(t, darwinRlimits, macPrivate)
	for _, s := range exampleShapes(t) {
		t.Run(s.name, func(t *testing.T) {
			sb := s.built(t, l, ModeSeatbelt)
			argv := append([]string{macProgram[s.argv[0]]}, s.argv[1:]...)
			path, args := sb.seatbeltRun(argv, macHost{workspace: macWorkspace, tmp: macTmp, shim: macShim,
				real: func(p string) string { return p }, ports: tooldPorts, sandboxExec: true})
			var b strings.Builder
			b.WriteString("path: " + path + "\n")
			var profile string
			var params [][2]string
			for i, a := range args {
				if i > 0 && args[i-1] == "-p" {
					profile = a
					b.WriteString("argv: <<profile\n" + a + "profile\n")
					continue
				}
				if kv, ok := strings.CutPrefix(a, "-D"); ok && profile != "" {
					k, v, _ := strings.Cut(kv, "=")
					params = append(params, [2]string{k, v})
				}
				b.WriteString("argv: " + a + "\n")
			}
			checkGolden(t, filepath.Join("seatbelt", s.name+".golden"), b.String())
			if profile == "" {
				t.Fatalf("no profile in %q", args)
			}
			used, err := readSBPL(profile)
			if err != nil {
				t.Fatalf("the profile would not parse: %v", err)
			}
			for _, u := range used {
				if !slices.ContainsFunc(params, func(kv [2]string) bool { return kv[0] == u }) {
					t.Errorf("the profile names the parameter %s, which no -D gives", u)
				}
			}
			if sb.mode == ModeNone {
				checkNoneGuard(t, profile)
				return
			}
			checkSeatbelt(t, sb, argv[0], profile, params)
		})
	}
}

// checkSeatbelt: deny by default; no path spliced into the text; writes to
// the workspace iff writable, the network iff allowed (and then never
// toold's ports, by port on every address); .git never writable but by
// git; no hard links; code mapped only from what is read; unix sockets
// only the run's own and the listed ones; toold's own files denied last.
func checkSeatbelt(t *testing.T, sb *sandbox, program, profile string, params [][2]string) {
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
	if has(`(remote ip "*:*")`) != sb.network || has("(allow network*") || has(`"localhost:*"`) {
		t.Errorf("network: want %v, by address and port, never all of network*", sb.network)
	}
	if sb.network {
		deny := strings.Index(profile, "(deny network-outbound")
		for _, p := range tooldPorts {
			if at := strings.Index(profile, fmt.Sprintf(`(remote ip "*:%d")`, p)); at < deny || deny < strings.LastIndex(profile, `(allow network-outbound (remote ip`) {
				t.Errorf("toold's port %d is not denied on every address after the network's allowance", p)
			}
		}
	}
	gitDeny := strings.Index(profile, `(regex #"/\.[Gg][Ii][Tt](/.*)?$")`)
	if git := filepath.Base(program) == "git" && sb.writable; git != (gitDeny < 0) || (!git && gitDeny < strings.LastIndex(profile, "(allow file-write*")) {
		t.Errorf(".git: denied after every write allow unless git writes it (git %v, deny at %d)", git, gitDeny)
	}
	if !has("(deny file-link)") || !has("(allow file-read* file-map-executable\n") || has("(allow file-map-executable") {
		t.Error("hard links are not denied, or code is mapped from elsewhere than what is read")
	}
	if n := strings.Count(profile, "(remote unix-socket "); n != 1+len(sb.sockets)+map[bool]int{true: 1}[sb.network] {
		t.Errorf("%d unix socket allowances, want the TMPDIR's, %d listed and the resolver's when networked", n, len(sb.sockets))
	}
	last := strings.LastIndex(profile, "(deny file-read* file-write*")
	if last < 0 || strings.Contains(profile[last:], "(allow") {
		t.Error("toold's own files are not denied after every allow")
	}
}

// checkNoneGuard: containment none on a Mac allows everything but toold's
// ports, every one of them.
func checkNoneGuard(t *testing.T, profile string) {
	t.Helper()
	if !strings.Contains(profile, "(allow default)") {
		t.Error("none's guard does not allow by default")
	}
	for _, p := range tooldPorts {
		if !strings.Contains(profile, fmt.Sprintf(`(remote ip "*:%d")`, p)) {
			t.Errorf("none's guard does not deny toold's port %d", p)
		}
	}
}

// TestJobPlans pins the Job Object, AppContainer, capabilities and grants
// a run of each shape gets on Windows, as toold builds them
// (Launcher.build, then jobPlanFor, which prepareRun applies), and checks
// what each must hold.
func TestJobPlans(t *testing.T) {
	l := targetLauncher(t, windowsRlimits, winPrivate)
	for _, s := range exampleShapes(t) {
		if s.sandbox.Containment == string(ModeNone) {
			continue // none has no plan
		}
		t.Run(s.name, func(t *testing.T) {
			sb := s.built(t, l, ModeJob)
			for i, u := range sb.sockets { // a Windows socket's path
				sb.sockets[i] = `C:\Users\dev\` + filepath.Base(u)
			}
			program := winProgram[s.argv[0]]
			p := sb.jobPlanFor(program, winRunID, winTmp, jobHost{workspace: winWorkspace, system: winSystem, numCPU: winCPUs})
			checkGolden(t, filepath.Join("job", s.name+".golden"), p.String())
			grants := map[string][]jobGrant{}
			for _, g := range p.Grants {
				grants[g.Path] = append(grants[g.Path], g)
			}
			if g := grants[winTmp]; len(g) != 1 || g[0].Trustee != trusteeRun || g[0].Lifetime != lifetimeRun {
				t.Errorf("the run's TEMP is not its own alone: %+v", g)
			}
			ws := grants[winWorkspace]
			if len(ws) != 1 || (ws[0].Access&0x2 != 0) != sb.writable || ws[0].Access&0x40 != 0 {
				t.Errorf("workspace grant %+v, writable %v (never FILE_DELETE_CHILD)", ws, sb.writable)
			}
			git := grants[winWorkspace+`\.git`]
			if wantDeny := sb.writable && winBase(program) != "git.exe"; (len(git) == 1 && git[0].Deny && git[0].Access&0x10000 != 0) != wantDeny {
				t.Errorf(".git deny %+v, want %v (write and DELETE denied unless git runs)", git, wantDeny)
			}
			if g := grants[winPrivate[1]]; len(g) != 1 || !g[0].Deny || g[0].Access != accessNoAny {
				t.Errorf("toold's own file in the workspace is not denied: %+v", g)
			}
			if len(grants[winPrivate[0]]) != 0 {
				t.Error("toold's state outside the workspace was granted or denied: it is out of reach with no ACE")
			}
			if slices.Contains(p.Capabilities, capInternetClient) != sb.network {
				t.Errorf("capabilities %v with network %v", p.Capabilities, sb.network)
			}
			if p.ActiveProcesses != sb.lim.Processes || p.JobMemory != sb.lim.Memory || p.CPURate == 0 {
				t.Errorf("limits %+v from %+v", p, sb.lim)
			}
		})
	}
}

// TestJobDescribesTheNetwork: a job run says what holds of the network.
func TestJobDescribesTheNetwork(t *testing.T) {
	sb := &sandbox{mode: ModeJob}
	if sb.short() != "job (AppContainer)" || !strings.Contains(sb.describe(), "no network") {
		t.Errorf("short %q, describe %q", sb.short(), sb.describe())
	}
	sb.network = true
	if !strings.Contains(sb.describe(), "no address of this machine") {
		t.Errorf("describe %q with the network allowed", sb.describe())
	}
}

// TestSeatbeltAllowList pins the profile of a Mac run whose network is an
// allow-list: the one connection it may make is to its egress proxy on
// the loopback (the port openNet listened on), it reads the run's bundle,
// and it has no resolver, no other address, no other port.
func TestSeatbeltAllowList(t *testing.T) {
	l := targetLauncher(t, darwinRlimits, macPrivate)
	l.cfg.Egress.Resolver = nil
	s := shape{name: "allow_list", argv: []string{"git", "ls-remote"}, sandbox: Sandbox{Network: AllowList(egress.Policy{
		Allow:  []string{"api.github.com"},
		Inject: []egress.Inject{{Host: "api.github.com", Header: "Authorization", Value: "Bearer placeholder-of-the-test"}}})}}
	bundle := "/private/var/folders/x1/abc/T/toold-command-1/egress-1/ca-bundle.pem"
	sb := s.built(t, l, ModeSeatbelt).withNet(&netRun{port: 49152, bundle: bundle})
	_, args := sb.seatbeltRun([]string{macProgram["git"], "ls-remote"}, macHost{workspace: macWorkspace, tmp: macTmp, shim: macShim,
		real: func(p string) string { return p }, ports: tooldPorts, sandboxExec: true})
	var profile string
	for i, a := range args {
		if i > 0 && args[i-1] == "-p" {
			profile = a
		}
	}
	checkGolden(t, filepath.Join("seatbelt", "allow_list.golden"), profile+"argv: "+strings.Join(args[slices.Index(args, "-p")+2:], " ")+"\n")
	if _, err := readSBPL(profile); err != nil {
		t.Fatalf("the profile would not parse: %v", err)
	}
	has := func(s string) bool { return strings.Contains(profile, s) }
	resolver := slices.ContainsFunc(seatbeltNetMach, func(s string) bool { return has(strconv.Quote(s)) }) || has(seatbeltResolver)
	if !has(`(allow network-outbound (remote ip "localhost:49152"))`) || has(`(remote ip "*:*")`) || resolver ||
		strings.Count(profile, "(remote ip ") != 1 {
		t.Errorf("the network of an allow-list run:\n%s", profile)
	}
	if !slices.Contains(args, "-DREAD_ONLY_0="+bundle) && !strings.Contains(strings.Join(args, " "), bundle) {
		t.Errorf("the run cannot read its bundle: %q", args)
	}
	if strings.Contains(profile+strings.Join(args, " "), "placeholder-of-the-test") {
		t.Error("the injected value reached the run's profile or argv")
	}
}

// TestJobAllowList pins what holds of an allow-list on Windows: an
// AppContainer reaches no address of its own machine, so no proxy toold
// serves is reachable from a job run, and the sandbox is refused when
// the tool is loaded, saying what to use instead (never started with
// the whole network, nor with none while the file asks for some).
func TestJobAllowList(t *testing.T) {
	l := targetLauncher(t, windowsRlimits, winPrivate)
	c := Sandbox{Network: AllowList(egress.Policy{Allow: []string{"api.github.com"}})}
	_, err := l.build(c, ModeJob, "", nil)
	if !errors.Is(err, ErrNoAllowList) {
		t.Fatalf("an allow-list in a job run: %v", err)
	}
	checkGolden(t, filepath.Join("job", "allow_list.golden"), err.Error()+"\n")
}
