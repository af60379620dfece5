package deploy

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The config checks the documentation shows work as written. Each runs the
// real binary with only the variables its command names (PATH and HOME
// aside), so a variable the config comes to need fails here until the
// documented command names it too.
func TestDocumentedConfigChecks(t *testing.T) {
	var cmds []documentedCommand
	for _, src := range []struct {
		file   string
		prefix string // what a documented line starts with, after trimming
	}{
		{"docs/deployment.md", ""},
		{"deploy/base/toold.yaml", "#"},
	} {
		found := 0
		for i, line := range strings.Split(string(readRepoFile(t, src.file)), "\n") {
			line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), src.prefix))
			if !strings.Contains(line, "toold -check-config deploy/") {
				continue
			}
			found++
			cmds = append(cmds, parseShellCommand(t, fmt.Sprintf("%s:%d", src.file, i+1), line))
		}
		if found == 0 {
			t.Errorf("%s shows no `toold -check-config deploy/...` command any more; update this test", src.file)
		}
	}
	cmds = append(cmds, dockerRunExamples(t)...)

	for _, c := range cmds {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, toolBin, c.args...)
		cmd.Dir = repoRoot()
		cmd.Env = processEnv(c.env)
		out, err := cmd.CombinedOutput()
		cancel()
		t.Logf("%s: %s toold %s", c.where, strings.Join(c.env, " "), strings.Join(c.args, " "))
		if err != nil {
			t.Errorf("%s: toold %s with %v: %v\n%s", c.where, strings.Join(c.args, " "), c.env, err, out)
		}
	}
}

// documentedCommand is a toold command line from the documentation: the
// variables it sets (placeholders filled in) and toold's arguments.
type documentedCommand struct {
	where string
	env   []string
	args  []string
}

// parseShellCommand reads `NAME=value ... toold ARGS...`.
func parseShellCommand(t *testing.T, where, line string) documentedCommand {
	t.Helper()
	c := documentedCommand{where: where}
	words := shellWords(line)
	for len(words) > 0 {
		name, value, ok := strings.Cut(words[0], "=")
		if !ok || !isEnvName(name) {
			break
		}
		c.env = append(c.env, name+"="+placeholder(name, value))
		words = words[1:]
	}
	if len(words) == 0 || words[0] != "toold" {
		t.Fatalf("%s: %q: want NAME=value ... toold ARGS", where, line)
	}
	for i, w := range words[1:] {
		if i > 0 && words[i] == "-workspace" {
			// The docs' workspace (/tmp) would hold a checkout under /tmp,
			// whose config toold rightly refuses to serve: an empty one.
			w = t.TempDir()
		}
		c.args = append(c.args, placeholder("", w))
	}
	return c
}

// dockerRunExamples reads the Dockerfile's `docker run` examples (comment
// lines, `\` continuations joined) as a -check-config of the config file
// they mount, with the variables they pass with -e and the flags they give
// toold.
func dockerRunExamples(t *testing.T) []documentedCommand {
	t.Helper()
	var cmds []documentedCommand
	lines := strings.Split(string(readRepoFile(t, "Dockerfile")), "\n")
	for i := 0; i < len(lines); i++ {
		text := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(lines[i]), "#"))
		if !strings.HasPrefix(text, "docker run ") {
			continue
		}
		where := fmt.Sprintf("Dockerfile:%d", i+1)
		for strings.HasSuffix(text, `\`) && i+1 < len(lines) {
			i++
			text = strings.TrimSuffix(text, `\`) + " " + strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(lines[i]), "#"))
		}
		c := documentedCommand{where: where}
		mounts := map[string]string{} // container path -> repository path
		words := shellWords(text)[2:]
		for len(words) > 0 && strings.HasPrefix(words[0], "-") {
			flag := words[0]
			if len(words) < 2 {
				t.Fatalf("%s: %s without a value", where, flag)
			}
			switch flag {
			case "-e", "--env":
				name, value, _ := strings.Cut(words[1], "=")
				c.env = append(c.env, name+"="+placeholder(name, value))
			case "-v", "--volume":
				f := strings.Split(words[1], ":")
				mounts[f[1]] = strings.Replace(f[0], "$PWD", repoRoot(), 1)
			case "-p", "--publish", "--network", "--name":
			default:
				t.Fatalf("%s: docker run flag %s: teach this test what it takes", where, flag)
			}
			words = words[2:]
		}
		if len(words) == 0 {
			t.Fatalf("%s: docker run without an image", where)
		}
		var config string
		for args := words[1:]; len(args) > 0; args = args[1:] {
			if args[0] == "-config" && len(args) > 1 {
				config = args[1]
				args = args[1:]
				continue
			}
			c.args = append(c.args, placeholder("", args[0]))
		}
		file, ok := mounts[config]
		if config == "" || !ok {
			t.Fatalf("%s: the example runs no -config it mounts (config %q, mounts %v)", where, config, mounts)
		}
		// The image's WORKDIR /workspace, the config's workspace, stands
		// in as a temporary directory.
		c.args = append([]string{"-check-config", file, "-workspace", t.TempDir()}, c.args...)
		cmds = append(cmds, c)
	}
	if len(cmds) == 0 {
		t.Error("the Dockerfile shows no `docker run` example any more; update this test")
	}
	return cmds
}

// shellWords splits a documented command line at spaces, keeping $(...),
// <...> and quoted strings whole (quotes removed).
func shellWords(s string) []string {
	var words []string
	var w strings.Builder
	in := false
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; {
		case ch == ' ' || ch == '\t':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		case ch == '"' || ch == '\'':
			end := strings.IndexByte(s[i+1:], ch)
			if end < 0 {
				end = len(s) - i - 1
			}
			w.WriteString(s[i+1 : i+1+end])
			i += end + 1
			in = true
		case ch == '<' || (ch == '$' && i+1 < len(s) && s[i+1] == '('):
			closer := map[byte]byte{'<': '>', '$': ')'}[ch]
			end := strings.IndexByte(s[i:], closer)
			if end < 0 {
				end = len(s) - i - 1
			}
			w.WriteString(s[i : i+end+1])
			i += end
			in = true
		default:
			w.WriteByte(ch)
			in = true
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words
}

// placeholder fills in what the documentation leaves to the reader
// (<the sha256>, $(...)) in a variable's value or a word: a well-formed
// hash for a *_SHA256 variable, else a word.
func placeholder(name, value string) string {
	if !strings.ContainsAny(value, "<$") {
		return value
	}
	if strings.HasSuffix(name, "_SHA256") {
		return strings.Repeat("0", 64)
	}
	return filledIn.ReplaceAllString(value, "placeholder")
}

var filledIn = regexp.MustCompile(`<[^>]*>|\$\([^)]*\)`)

func isEnvName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, r := range s {
		if r != '_' && (r < 'A' || r > 'Z') && (r < 'a' || r > 'z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}
