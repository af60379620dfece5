package deploy

import (
	"context"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd, args string
	line      int
}

type stage struct {
	image, name string
	instrs      []instruction
}

// parseDockerfile reads stages and instructions: enough of the format for
// the checks below (comments, line continuations, FROM ... AS name).
func parseDockerfile(t testing.TB, data string) []*stage {
	t.Helper()
	var stages []*stage
	var cur strings.Builder
	start := 0
	flush := func() {
		text := strings.TrimSpace(cur.String())
		cur.Reset()
		if text == "" {
			return
		}
		cmd, args, _ := strings.Cut(text, " ")
		in := instruction{strings.ToUpper(cmd), strings.TrimSpace(args), start}
		if in.cmd == "FROM" {
			f := slices.DeleteFunc(strings.Fields(in.args), func(w string) bool { return strings.HasPrefix(w, "--") })
			if len(f) == 0 {
				t.Fatalf("Dockerfile line %d: FROM without an image", in.line)
			}
			s := &stage{image: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			}
			stages = append(stages, s)
			return
		}
		if len(stages) == 0 {
			if in.cmd != "ARG" {
				t.Fatalf("Dockerfile line %d: %s before the first FROM", in.line, in.cmd)
			}
			return
		}
		s := stages[len(stages)-1]
		s.instrs = append(s.instrs, in)
	}
	for i, line := range strings.Split(data, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") { // comments, inside continuations too
			continue
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if body, cont := strings.CutSuffix(trimmed, `\`); cont {
			cur.WriteString(body + " ")
			continue
		}
		cur.WriteString(trimmed)
		flush()
	}
	flush()
	return stages
}

func (s *stage) all(cmd string) []instruction {
	var out []instruction
	for _, in := range s.instrs {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// flagValue returns the value of --name=value at the start of args.
func flagValue(args, name string) string {
	for _, f := range strings.Fields(args) {
		if v, ok := strings.CutPrefix(f, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

// copyArgs splits COPY's arguments into flags, sources and destination.
func copyArgs(args string) (flags map[string]string, srcs []string, dst string) {
	flags = map[string]string{}
	var rest []string
	for _, f := range strings.Fields(args) {
		if k, v, ok := strings.Cut(strings.TrimPrefix(f, "--"), "="); ok && strings.HasPrefix(f, "--") {
			flags[k] = v
			continue
		}
		rest = append(rest, f)
	}
	return flags, rest[:len(rest)-1], rest[len(rest)-1]
}

func TestDockerfile(t *testing.T) {
	stages := parseDockerfile(t, string(readRepoFile(t, "Dockerfile")))
	m := renderBase(t)
	podSC := m.deployment.Spec.Template.Spec.SecurityContext
	c := m.container(t)
	if len(stages) < 2 {
		t.Fatalf("%d stages; want a build stage and a minimal run stage", len(stages))
	}
	names := map[string]*stage{}
	for _, s := range stages {
		if s.name != "" {
			names[s.name] = s
		}
		if names[s.image] == nil && !strings.Contains(s.image, "@sha256:") &&
			(!strings.Contains(s.image, ":") || strings.HasSuffix(s.image, ":latest")) && s.image != "scratch" {
			t.Errorf("FROM %s: pin the image by tag (or digest), not latest", s.image)
		}
	}

	// The build stage: the Go of go.mod, pure Go, trimmed, stamped.
	build, out := buildStage(t, stages)
	goLine := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(readRepoFile(t, "go.mod"))
	if goLine == nil {
		t.Fatal("go.mod has no go line")
	}
	if goMinor := string(goLine[1]); !strings.HasPrefix(build.image, "golang:"+goMinor) {
		t.Errorf("build stage FROM %s: want golang:%s-... (the go line of go.mod)", build.image, goMinor)
	}
	stampVars := stampableVars(t)
	for _, v := range []string{"version", "revision"} {
		if !stampVars[v] {
			t.Errorf("cmd/toold has no package-level string var %s for -X main.%s", v, v)
		}
	}

	// The run stage is the last one: docker build's default target.
	run := stages[len(stages)-1]
	if !strings.HasPrefix(run.image, "gcr.io/distroless/static") && run.image != "scratch" {
		t.Errorf("final stage FROM %s: want distroless static or scratch", run.image)
	}
	var entry []string
	for _, s := range stages {
		eps := s.all("ENTRYPOINT")
		if len(eps) == 0 {
			continue // not a run image
		}
		where := "stage " + s.name
		checkRunStage(t, where, s, *podSC.RunAsUser, derefOr(podSC.RunAsGroup, -1))
		if err := json.Unmarshal([]byte(eps[len(eps)-1].args), &entry); err != nil || len(entry) == 0 {
			t.Errorf("%s: ENTRYPOINT %s: want the exec form [\"/path/to/toold\"]", where, eps[len(eps)-1].args)
			continue
		}
		if !slices.ContainsFunc(s.all("COPY"), func(in instruction) bool {
			flags, srcs, dst := copyArgs(in.args)
			return names[flags["from"]] == build && slices.Contains(srcs, out) && dst == entry[0]
		}) {
			t.Errorf("%s: ENTRYPOINT %s is not the binary the build stage writes (%s)", where, entry[0], out)
		}
		var exposed []string
		for _, in := range s.all("EXPOSE") {
			exposed = append(exposed, strings.Fields(in.args)...)
		}
		for _, p := range c.Ports {
			if !slices.Contains(exposed, strconv.Itoa(int(p.ContainerPort))) && !slices.Contains(exposed, strconv.Itoa(int(p.ContainerPort))+"/tcp") {
				t.Errorf("%s: the Deployment's port %d (%s) is not EXPOSEd (EXPOSE %v)", where, p.ContainerPort, p.Name, exposed)
			}
		}
	}

	// Every path COPY takes from the build context exists.
	for _, s := range stages {
		for _, in := range s.all("COPY") {
			flags, srcs, _ := copyArgs(in.args)
			if flags["from"] != "" {
				continue
			}
			for _, src := range srcs {
				if matches, _ := filepath.Glob(repoPath(src)); len(matches) == 0 {
					t.Errorf("Dockerfile line %d: COPY %s: no such path in the repository", in.line, src)
				}
			}
		}
	}
}

// buildStage finds the stage that runs `go build` and checks how; it
// returns the stage and the binary's path.
func buildStage(t testing.TB, stages []*stage) (*stage, string) {
	t.Helper()
	for _, s := range stages {
		for _, in := range s.all("RUN") {
			if !strings.Contains(in.args, "go build") {
				continue
			}
			env := strings.Join(slices.Collect(func(yield func(string) bool) {
				for _, e := range s.all("ENV") {
					if !yield(e.args) {
						return
					}
				}
			}), " ")
			if !regexp.MustCompile(`\bCGO_ENABLED=0\b`).MatchString(env + " " + in.args) {
				t.Errorf("line %d: go build without CGO_ENABLED=0 (ENV or on the RUN line): not a static binary", in.line)
			}
			for _, want := range []string{"-trimpath", "./cmd/toold", "-s -w",
				"-X main.version=${VERSION}", "-X main.revision=${REVISION}"} {
				if !strings.Contains(in.args, want) {
					t.Errorf("line %d: go build lacks %q", in.line, want)
				}
			}
			for _, arg := range []string{"VERSION", "REVISION"} {
				if !slices.ContainsFunc(s.all("ARG"), func(a instruction) bool {
					name, _, _ := strings.Cut(a.args, "=")
					return name == arg && a.line < in.line
				}) {
					t.Errorf("line %d: ${%s} is used, but no ARG %s precedes it in the stage", in.line, arg, arg)
				}
			}
			out := regexp.MustCompile(`-o\s+(\S+)`).FindStringSubmatch(in.args)
			if out == nil {
				t.Fatalf("line %d: go build without -o PATH", in.line)
			}
			return s, out[1]
		}
	}
	t.Fatal("no stage runs go build")
	return nil, ""
}

// checkRunStage: a numeric, non-root USER equal to the Deployment's.
func checkRunStage(t testing.TB, where string, s *stage, uid, gid int64) {
	t.Helper()
	users := s.all("USER")
	if len(users) == 0 {
		t.Errorf("%s: no USER: the image would run as root", where)
		return
	}
	u, g, hasGroup := strings.Cut(users[len(users)-1].args, ":")
	n, err := strconv.ParseInt(u, 10, 64)
	switch {
	case err != nil:
		t.Errorf("%s: USER %s: want a numeric uid (runAsNonRoot cannot verify a name)", where, u)
	case n == 0:
		t.Errorf("%s: USER 0 is root", where)
	case n != uid:
		t.Errorf("%s: USER %d, the Deployment's runAsUser is %d", where, n, uid)
	}
	if gn, err := strconv.ParseInt(g, 10, 64); hasGroup && gid >= 0 && (err != nil || gn != gid) {
		t.Errorf("%s: USER group %s, the Deployment's runAsGroup is %d", where, g, gid)
	}
}

// stampableVars lists cmd/toold's package-level string variables, the
// only ones -X can set.
func stampableVars(t testing.TB) map[string]bool {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(repoPath("cmd", "toold", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, sp := range gd.Specs {
				vs := sp.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							vars[n.Name] = true
						}
					}
				}
			}
		}
	}
	return vars
}

// dockerignored reports whether .dockerignore's patterns leave rel out of
// the build context (the last matching pattern wins; "!" re-includes).
func dockerignored(patterns []string, rel string) bool {
	ignored := false
	for _, p := range patterns {
		neg := strings.HasPrefix(p, "!")
		p = strings.TrimPrefix(strings.TrimPrefix(p, "!"), "/")
		if dockerPattern(p).MatchString(rel) {
			ignored = !neg
		}
	}
	return ignored
}

// dockerPattern turns a .dockerignore pattern into a regexp on slash
// paths: * and ? within a name, ** across directories; a match on a
// directory covers what is under it.
func dockerPattern(p string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(p); i++ {
		switch {
		case strings.HasPrefix(p[i:], "**/"):
			b.WriteString("(.*/)?")
			i += 2
		case strings.HasPrefix(p[i:], "**"):
			b.WriteString(".*")
			i++
		case p[i] == '*':
			b.WriteString("[^/]*")
		case p[i] == '?':
			b.WriteString("[^/]")
		default:
			b.WriteString(regexp.QuoteMeta(p[i : i+1]))
		}
	}
	b.WriteString("(/.*)?$")
	return regexp.MustCompile(b.String())
}

// The build context keeps every file `go build ./cmd/toold` reads: the
// module's Go files and embedded files of every package it compiles, and
// go.mod and go.sum.
func TestDockerignoreKeepsTheBuildInputs(t *testing.T) {
	var patterns []string
	for _, line := range strings.Split(string(readRepoFile(t, ".dockerignore")), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			patterns = append(patterns, filepath.ToSlash(filepath.Clean(line)))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "list", "-deps", "-f",
		`{{if .Module}}{{if eq .Module.Path "github.com/toold/toold"}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{end}}{{end}}`,
		"./cmd/toold")
	cmd.Dir = repoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0") // the files the Dockerfile's build compiles
	outb, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	needed := []string{"go.mod", "go.sum"}
	for _, f := range strings.Fields(string(outb)) {
		rel, err := filepath.Rel(repoRoot(), f)
		if err != nil {
			t.Fatal(err)
		}
		needed = append(needed, filepath.ToSlash(rel))
	}
	if len(needed) < 10 {
		t.Fatalf("go list found only %v; the query is broken", needed)
	}
	for _, f := range needed {
		if dockerignored(patterns, f) {
			t.Errorf(".dockerignore leaves out %s, which go build ./cmd/toold needs", f)
		}
	}
	// And the patterns do what they say (a self-check of dockerPattern).
	for path, want := range map[string]bool{"fs.test": true, "internal/tools/fs/fs_test.go": true, "deploy/base/hpa.yaml": true,
		"internal/tools/fs/fs.go": false, ".git/config": true, "api/openapi.yaml": false} {
		if got := dockerignored(patterns, path); got != want {
			t.Errorf("dockerignored(%s) = %v, want %v", path, got, want)
		}
	}
}
