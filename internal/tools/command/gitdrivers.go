package command

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/toold/toold/internal/tools"
)

// Filter and merge drivers are the programs of a repository that no fixed
// -c reaches: attributes (.gitattributes, .git/info/attributes) name a
// driver, and the repository's configuration says what it runs
// (`filter.<name>.clean`, `merge.<name>.driver`); git status runs a clean
// filter for every file whose stat information changed. So before each
// git run toold reads the configuration the run's repository will read
// (its config and config.worktree, and every file they include), and
// switches off every filter and merge driver defined there, by name, on
// the command line: an empty clean, smudge and process and required=false
// for a filter (git then reads the file as it is), `false` for a merge
// driver (the merge stops with a conflict). System and global
// configuration are off already (gitEnv), so the names found are all the
// names git will know.

// Bounds of the scan: git itself follows includes ten deep.
const (
	gitMaxIncludeDepth = 10
	gitMaxConfigFiles  = 64
	gitMaxConfigBytes  = 1 << 20
)

// gitDriverSettings are the -c words that switch off the repository's
// drivers for a git run in dir (absolute) with git's global options
// globals (-C, --git-dir are followed). A driver name git's -c cannot
// carry (one holding "=" or a line break) refuses the call.
func gitDriverSettings(dir string, globals []string) ([]string, error) {
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real // git discovers from its real working directory
	}
	gitDir := ""
	for i := 0; i+1 < len(globals); i++ {
		switch globals[i] {
		case "-C":
			dir = joinDir(dir, globals[i+1])
			i++
		case "--git-dir":
			gitDir = joinDir(dir, globals[i+1])
			i++
		}
	}
	if gitDir == "" {
		gitDir = findGitDir(dir)
	}
	if gitDir == "" {
		return nil, nil
	}
	files := []string{filepath.Join(gitDir, "config.worktree")}
	common := gitDir
	if b, err := readSmall(filepath.Join(gitDir, "commondir")); err == nil {
		common = joinDir(gitDir, strings.TrimSpace(string(b)))
	}
	files = append(files, filepath.Join(common, "config"))
	sc := &gitConfigScan{seen: map[string]bool{}}
	for _, f := range files {
		sc.file(f, 0)
	}
	var out []string
	for _, d := range sc.drivers {
		if strings.ContainsAny(d.name, "=\n\r\x00") {
			return nil, tools.Errorf(tools.SecurityError, "the repository's configuration defines a %s driver named %q, "+
				"which toold cannot switch off on git's command line: the call is refused", d.section, d.name)
		}
		p := d.section + "." + d.name + "."
		if d.section == "filter" {
			out = append(out, "-c", p+"clean=", "-c", p+"smudge=", "-c", p+"process=", "-c", p+"required=false")
		} else {
			out = append(out, "-c", p+"driver=false")
		}
	}
	return out, nil
}

func joinDir(base, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(base, p)
}

// findGitDir is the git directory git discovers from dir: the first .git
// (a directory, or a file naming one) from dir up to the root.
func findGitDir(dir string) string {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		p := filepath.Join(d, ".git")
		if fi, err := os.Stat(p); err == nil {
			if fi.IsDir() {
				return p
			}
			if b, err := readSmall(p); err == nil {
				if rest, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:"); ok {
					return joinDir(d, strings.TrimSpace(rest))
				}
			}
		}
		if d == filepath.Dir(d) {
			return ""
		}
	}
}

// readSmall reads a regular file of at most gitMaxConfigBytes; a FIFO or
// device planted in a repository neither blocks nor feeds the scan.
func readSmall(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	return io.ReadAll(io.LimitReader(f, gitMaxConfigBytes))
}

// gitDriver is one driver a configuration defines.
type gitDriver struct{ section, name string }

// gitConfigScan collects the filter and merge drivers of config files,
// following their includes.
type gitConfigScan struct {
	seen    map[string]bool
	drivers []gitDriver
}

func (s *gitConfigScan) file(path string, depth int) {
	if depth > gitMaxIncludeDepth || len(s.seen) >= gitMaxConfigFiles || s.seen[path] {
		return
	}
	s.seen[path] = true
	b, err := readSmall(path)
	if err != nil {
		return // git skips a missing include too
	}
	drivers, includes := parseGitConfig(b)
	for _, d := range drivers {
		if !slices.Contains(s.drivers, d) {
			s.drivers = append(s.drivers, d)
		}
	}
	for _, inc := range includes {
		if strings.HasPrefix(inc, "~") {
			continue // the run's HOME is its private directory: nothing there is the repository's
		}
		s.file(joinDir(filepath.Dir(path), inc), depth+1)
	}
}

// parseGitConfig returns the filter and merge drivers a config file's
// section headers define and the paths of its include and includeIf
// sections (every condition taken as true). It reads git's syntax
// loosely, erring towards more names: a name too many costs nothing.
func parseGitConfig(b []byte) (drivers []gitDriver, includes []string) {
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), gitMaxConfigBytes)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			var sub string
			var ok bool
			section, sub, ok, line = parseSectionHeader(line)
			if ok && (section == "filter" || section == "merge") {
				drivers = append(drivers, gitDriver{section, sub})
			}
		}
		if section != "include" && section != "includeif" {
			continue
		}
		key, value, found := strings.Cut(line, "=")
		if found && strings.EqualFold(strings.TrimSpace(key), "path") {
			if v := gitValue(value); v != "" {
				includes = append(includes, v)
			}
		}
	}
	return drivers, includes
}

// parseSectionHeader reads "[section "sub"]" or "[section.sub]" at the
// start of line: the lower-cased section, the subsection, whether there
// is one, and what follows the header on the line.
func parseSectionHeader(line string) (section, sub string, hasSub bool, rest string) {
	body := line[1:]
	end := strings.IndexAny(body, " \t\"]")
	if end < 0 {
		return strings.ToLower(body), "", false, ""
	}
	name := body[:end]
	body = strings.TrimLeft(body[end:], " \t")
	if strings.HasPrefix(body, "\"") {
		var b strings.Builder
		i := 1
		for ; i < len(body) && body[i] != '"'; i++ {
			if body[i] == '\\' && i+1 < len(body) {
				i++
			}
			b.WriteByte(body[i])
		}
		rest = body[min(len(body), i+1):]
		rest = rest[min(len(rest), strings.Index(rest, "]")+1):]
		return strings.ToLower(name), b.String(), true, rest
	}
	rest = body[min(len(body), strings.Index(body, "]")+1):]
	if sec, sub, ok := strings.Cut(name, "."); ok {
		return strings.ToLower(sec), strings.ToLower(sub), true, rest // the old syntax: the subsection is lower-cased
	}
	return strings.ToLower(name), "", false, rest
}

// gitValue is a config value without comments and quotes.
func gitValue(v string) string {
	var b strings.Builder
	quoted := false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"':
			quoted = !quoted
		case c == '\\' && i+1 < len(v):
			i++
			b.WriteByte(v[i])
		case (c == '#' || c == ';') && !quoted:
			return strings.TrimSpace(b.String())
		default:
			b.WriteByte(c)
		}
	}
	return strings.TrimSpace(b.String())
}
