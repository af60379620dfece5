package command

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/toold/toold/internal/tools"
)

// Filter, merge and diff drivers are the programs of a repository that no
// fixed -c reaches: attributes (.gitattributes, .git/info/attributes) name
// a driver, and the repository's configuration says what it runs
// (`filter.<name>.clean`, `merge.<name>.driver`, `diff.<name>.command`,
// `diff.<name>.textconv`); git status runs a clean filter for every file
// whose stat information changed. So before each git run toold reads
// every configuration git may read in it, and switches off every driver
// defined there, by name, on the command line: an empty clean, smudge and
// process and required=false for a filter (git then reads the file as it
// is), `false` for a merge driver (the merge stops with a conflict),
// `true` for a diff command (that file's diff is empty) and `cat` for a
// textconv (the file as it is). Command-line settings reach the git
// processes git starts in submodules too (GIT_CONFIG_PARAMETERS), so a
// name found anywhere is off everywhere.
//
// Every configuration git may read (issue 38, finding 2: a filter planted
// in a submodule's own configuration ran): the run's repository's config
// and config.worktree, every file they include (includeIf's conditions
// all taken as true), and, through its index, every repository it may
// enter: each gitlink (a submodule, or a repository added whole) whose
// directory holds a .git, followed to its git directory (a legacy .git
// directory in the submodule, .git/modules/<name>, or wherever a .git
// file points inside the workspace), recursively. System and global
// configuration are off already (gitEnv), so the names found are all the
// names git will know. The same reading finds the submodules' names:
// unless the tool enables submodules, each is told to be ignored and not
// fetched (git.go), and a submodule whose update is a command ("!…") has
// it set to none either way.

// Bounds of the scan: git itself follows includes ten deep.
const (
	gitMaxIncludeDepth = 10
	gitMaxConfigFiles  = 256
	gitMaxConfigBytes  = 1 << 20
	gitMaxRepos        = 64
	gitMaxNesting      = 8
)

// gitSettings are the -c words that switch off the drivers of every
// repository a git run in dir (absolute) may read, with git's global
// options globals (-C, --git-dir and --work-tree are followed); nothing
// outside workspace is read. A name git's -c cannot carry (one holding
// "=" or a line break), or a repository the scan cannot read whole,
// refuses the call. submodules says whether the tool may enter
// submodules.
func gitSettings(workspace, dir string, globals []string, submodules bool) ([]string, error) {
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real // git discovers from its real working directory
	}
	if real, err := filepath.EvalSymlinks(workspace); err == nil {
		workspace = real
	}
	gitDir, workTree := "", ""
	for i := 0; i+1 < len(globals); i++ {
		switch globals[i] {
		case "-C":
			dir = joinDir(dir, globals[i+1])
			i++
		case "--git-dir":
			gitDir = joinDir(dir, globals[i+1])
			i++
		case "--work-tree":
			workTree = joinDir(dir, globals[i+1])
			i++
		}
	}
	if gitDir == "" {
		gitDir, workTree = findGitDir(dir)
	} else if workTree == "" {
		workTree = dir
	}
	if gitDir == "" {
		return nil, nil
	}
	sc := &gitConfigScan{seen: map[string]bool{}, repos: map[string]bool{}, workspace: workspace}
	sc.repo(gitDir, workTree, 0)
	if sc.err != nil {
		return nil, tools.Errorf(tools.SecurityError, "toold cannot check what the repository would run (%v): the call is refused", sc.err)
	}
	return sc.settings(submodules)
}

// settings are the -c words of what the scan found.
func (sc *gitConfigScan) settings(submodules bool) ([]string, error) {
	var out []string
	// The work trees read, inside the workspace, are safe directories:
	// git before 2.46 takes safe.directory's entries whole, so the
	// workspace's entry did not cover a repository below it (a linked
	// worktree, a submodule); what they define is switched off below.
	for _, wt := range sc.workTrees {
		out = append(out, "-c", "safe.directory="+wt)
	}
	for _, d := range sc.drivers {
		if strings.ContainsAny(d.name, "=\n\r\x00") {
			return nil, tools.Errorf(tools.SecurityError, "the repository's configuration defines a %s named %q, "+
				"which toold cannot switch off on git's command line: the call is refused", d.section, d.name)
		}
		p := d.section + "." + d.name + "."
		switch d.section {
		case "filter":
			out = append(out, "-c", p+"clean=", "-c", p+"smudge=", "-c", p+"process=", "-c", p+"required=false")
		case "merge":
			out = append(out, "-c", p+"driver=false")
		case "diff":
			out = append(out, "-c", p+"command=true", "-c", p+"textconv=cat")
		case "submodule":
			if !submodules {
				out = append(out, "-c", p+"ignore=all", "-c", p+"fetchRecurseSubmodules=false")
			}
			if slices.Contains(sc.commands, d.name) {
				out = append(out, "-c", p+"update=none")
			}
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

// findGitDir is the git directory git discovers from dir and its work
// tree: the first .git (a directory, or a file naming one) from dir up to
// the root, and the directory holding it.
func findGitDir(dir string) (gitDir, workTree string) {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if g := gitDirAt(d); g != "" {
			return g, d
		}
		if d == filepath.Dir(d) {
			return "", ""
		}
	}
}

// gitDirAt is the git directory of the work tree d: d/.git, a directory
// or a file naming one ("gitdir: …", relative to d); "" when there is
// none.
func gitDirAt(d string) string {
	p := filepath.Join(d, ".git")
	fi, err := os.Stat(p)
	if err != nil {
		return ""
	}
	if fi.IsDir() {
		return p
	}
	if b, err := readSmall(p); err == nil {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:"); ok {
			return joinDir(d, strings.TrimSpace(rest))
		}
	}
	return ""
}

// readSmall reads a regular file of at most gitMaxConfigBytes; a FIFO or
// device planted in a repository neither blocks nor feeds the scan.
func readSmall(path string) ([]byte, error) { return readRegular(path, gitMaxConfigBytes) }

// readRegular reads a regular file of at most limit bytes.
func readRegular(path string, limit int64) ([]byte, error) {
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
	if fi.Size() > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", filepath.Base(path), limit)
	}
	return io.ReadAll(io.LimitReader(f, limit))
}

// gitDriver is one driver a configuration defines (section filter, merge
// or diff), or one submodule it names (section submodule).
type gitDriver struct{ section, name string }

// gitConfigScan collects the drivers and submodules of the configuration
// files of the repositories a git run may read.
type gitConfigScan struct {
	workspace string
	seen      map[string]bool // config files read
	repos     map[string]bool // git directories read
	drivers   []gitDriver
	commands  []string // submodules whose update is a command
	workTrees []string // the work trees of the repositories read, inside the workspace
	err       error    // the first repository the scan could not read whole
}

func (s *gitConfigScan) fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

// inside says whether path (real) lies in the workspace.
func (s *gitConfigScan) inside(path string) bool {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	rel, err := filepath.Rel(s.workspace, path)
	return err == nil && filepath.IsLocal(rel)
}

// repo reads the git directory gitDir, whose work tree is workTree: its
// configuration, its .gitmodules and, through its index, the repositories
// of its gitlinks.
func (s *gitConfigScan) repo(gitDir, workTree string, nesting int) {
	if fi, err := os.Stat(gitDir); s.repos[gitDir] || err != nil || !fi.IsDir() {
		return
	}
	if nesting > gitMaxNesting || len(s.repos) >= gitMaxRepos {
		s.fail(fmt.Errorf("more than %d repositories, or nested more than %d deep", gitMaxRepos, gitMaxNesting))
		return
	}
	s.repos[gitDir] = true
	common := gitDir
	if b, err := readSmall(filepath.Join(gitDir, "commondir")); err == nil {
		common = joinDir(gitDir, strings.TrimSpace(string(b)))
	}
	var cfg gitConfigFile
	for _, f := range []string{filepath.Join(common, "config"), filepath.Join(gitDir, "config.worktree")} {
		s.file(f, 0, &cfg)
	}
	if cfg.workTree != "" {
		workTree = joinDir(gitDir, cfg.workTree) // core.worktree: relative to the git directory
	}
	if workTree != "" && workTree != s.workspace && s.inside(workTree) && !slices.Contains(s.workTrees, workTree) &&
		!strings.ContainsAny(workTree, "\n\r\x00") {
		s.workTrees = append(s.workTrees, workTree)
	}
	if workTree != "" {
		if b, err := readSmall(filepath.Join(workTree, ".gitmodules")); err == nil {
			s.add(parseGitConfig(b))
		}
	}
	hashLen := 20
	if strings.EqualFold(cfg.objectFormat, "sha256") {
		hashLen = 32
	}
	links, err := s.gitlinks(gitDir, hashLen)
	if err != nil {
		s.fail(err)
		return
	}
	if workTree == "" {
		return
	}
	for _, p := range links {
		if !filepath.IsLocal(p) {
			continue // git refuses such a path too
		}
		sub := filepath.Join(workTree, p)
		if !s.inside(sub) {
			continue // git's view in a sandbox: nothing planted there
		}
		if g := gitDirAt(sub); g != "" && s.inside(g) {
			s.repo(g, sub, nesting+1)
		}
	}
}

// gitlinks are the gitlink paths of gitDir's index, and of the shared
// index of a split one.
func (s *gitConfigScan) gitlinks(gitDir string, hashLen int) ([]string, error) {
	var links []string
	name := "index"
	for range 2 {
		b, err := readRegular(filepath.Join(gitDir, name), gitMaxIndexBytes)
		if errors.Is(err, fs.ErrNotExist) {
			return links, nil // no index yet: nothing to enter
		}
		if err != nil {
			return nil, err
		}
		ix, err := parseGitIndex(b, hashLen)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(gitDir, name), err)
		}
		links = append(links, ix.gitlinks...)
		if ix.shared == "" {
			break
		}
		name = ix.shared
	}
	return links, nil
}

// add records what one configuration file defines.
func (s *gitConfigScan) add(cfg gitConfigFile) {
	for _, d := range cfg.drivers {
		if !slices.Contains(s.drivers, d) {
			s.drivers = append(s.drivers, d)
		}
	}
	for _, name := range cfg.commands {
		if !slices.Contains(s.commands, name) {
			s.commands = append(s.commands, name)
		}
	}
}

// file reads one configuration file and what it includes, collecting into
// s, and into into the settings git reads of the repository's own.
func (s *gitConfigScan) file(path string, depth int, into *gitConfigFile) {
	if depth > gitMaxIncludeDepth || s.seen[path] {
		return
	}
	if len(s.seen) >= gitMaxConfigFiles {
		s.fail(fmt.Errorf("more than %d configuration files", gitMaxConfigFiles))
		return
	}
	s.seen[path] = true
	b, err := readSmall(path)
	if err != nil {
		return // git skips a missing include too
	}
	cfg := parseGitConfig(b)
	s.add(cfg)
	if cfg.objectFormat != "" {
		into.objectFormat = cfg.objectFormat
	}
	if cfg.workTree != "" {
		into.workTree = cfg.workTree
	}
	for _, inc := range cfg.includes {
		if strings.HasPrefix(inc, "~") {
			continue // the run's HOME is its private directory: nothing there is the repository's
		}
		s.file(joinDir(filepath.Dir(path), inc), depth+1, into)
	}
}

// gitConfigFile is what the guard reads of a configuration file.
type gitConfigFile struct {
	drivers      []gitDriver // filter, merge and diff drivers; submodules
	includes     []string    // the paths of include and includeIf sections
	commands     []string    // submodules whose update is a command ("!…")
	objectFormat string      // extensions.objectFormat
	workTree     string      // core.worktree
}

// parseGitConfig reads a configuration file (or a .gitmodules) loosely,
// erring towards more names: a name too many costs nothing. Every
// includeIf's condition is taken as true.
func parseGitConfig(b []byte) gitConfigFile {
	var cfg gitConfigFile
	section, sub := "", ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), gitMaxConfigBytes)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			var ok bool
			section, sub, ok, line = parseSectionHeader(line)
			switch {
			case !ok:
				sub = ""
			case section == "filter" || section == "merge" || section == "diff" || section == "submodule":
				cfg.drivers = append(cfg.drivers, gitDriver{section, sub})
			}
		}
		key, value, found := strings.Cut(line, "=")
		if !found {
			continue
		}
		key = strings.ToLower(strings.TrimSpace(key))
		switch {
		case (section == "include" || section == "includeif") && key == "path":
			if v := gitValue(value); v != "" {
				cfg.includes = append(cfg.includes, v)
			}
		case section == "submodule" && sub != "" && key == "update":
			if strings.HasPrefix(gitValue(value), "!") {
				cfg.commands = append(cfg.commands, sub)
			}
		case section == "extensions" && sub == "" && key == "objectformat":
			cfg.objectFormat = gitValue(value)
		case section == "core" && sub == "" && key == "worktree":
			cfg.workTree = gitValue(value)
		}
	}
	return cfg
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
