package deploy

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/toold/toold/internal/testpeer"
)

// brewPackage is one archive a formula installs: the branch of on_macos or
// on_linux and the CPU condition it sits in, its url, sha256 and install
// stanza.
type brewPackage struct {
	os, cpu string // "darwin"/"linux"; "amd64"/"arm64"
	url     string
	sha256  string
	install []string
}

// brewFormula is what parseFormula reads of a formula.
type brewFormula struct {
	class, desc, homepage, version string
	packages                       []brewPackage
	test                           []string
	caveats                        []string
}

// cpuConditions are the CPU tests GoReleaser's formula template writes, by
// the GOARCH they select.
var cpuConditions = map[string]string{
	"Hardware::CPU.intel?":                             "amd64",
	"Hardware::CPU.arm?":                               "arm64",
	"Hardware::CPU.intel? && Hardware::CPU.is_64_bit?": "amd64",
	"Hardware::CPU.arm? && Hardware::CPU.is_64_bit?":   "arm64",
}

var (
	formulaClass  = regexp.MustCompile(`^class ([A-Z][A-Za-z0-9]*) < Formula$`)
	formulaString = regexp.MustCompile(`^(desc|homepage|version|url|sha256|license) "([^"\\]*)"$`)
	formulaIf     = regexp.MustCompile(`^if (.+)$`)
	formulaDo     = regexp.MustCompile(`^(on_macos|on_linux|test|define_method\(:install\)) do$`)
)

// parseFormula reads the Ruby subset GoReleaser writes for a formula: one
// class, its strings, on_macos and on_linux blocks of CPU conditions each
// holding url, sha256 and an install method, a test block and caveats.
// Anything else, or blocks that do not close, is an error: a formula this
// parser does not understand is one the test cannot vouch for.
func parseFormula(src string) (*brewFormula, error) {
	f := &brewFormula{}
	var stack []string // open blocks: "class", "on_macos", "if amd64", "install", "test", "caveats", "heredoc"
	var pkg *brewPackage
	osOf := map[string]string{"on_macos": "darwin", "on_linux": "linux"}
	sc := bufio.NewScanner(strings.NewReader(src))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		top := ""
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		fail := func(format string, a ...any) error {
			return fmt.Errorf("line %d %q: %s", n, line, fmt.Sprintf(format, a...))
		}
		switch {
		case top == "heredoc":
			if line == "EOS" {
				stack = stack[:len(stack)-1]
			} else {
				f.caveats = append(f.caveats, line)
			}
			continue
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		case line == "end":
			if len(stack) == 0 {
				return nil, fail("end without a block")
			}
			if strings.HasPrefix(top, "if ") {
				if pkg.url == "" || pkg.sha256 == "" || pkg.install == nil {
					return nil, fail("a %s package without url, sha256 or install", pkg.cpu)
				}
				f.packages = append(f.packages, *pkg)
				pkg = nil
			}
			stack = stack[:len(stack)-1]
			continue
		}
		switch top {
		case "":
			m := formulaClass.FindStringSubmatch(line)
			if m == nil || f.class != "" {
				return nil, fail("want one class ... < Formula")
			}
			f.class = m[1]
			stack = append(stack, "class")
		case "class":
			if m := formulaString.FindStringSubmatch(line); m != nil {
				switch m[1] {
				case "desc":
					f.desc = m[2]
				case "homepage":
					f.homepage = m[2]
				case "version":
					f.version = m[2]
				default:
					return nil, fail("%s outside a platform block", m[1])
				}
			} else if m := formulaDo.FindStringSubmatch(line); m != nil && m[1] != "define_method(:install)" {
				stack = append(stack, m[1])
			} else if line == "def caveats" {
				stack = append(stack, "caveats")
			} else {
				return nil, fail("not a statement of a GoReleaser formula")
			}
		case "on_macos", "on_linux":
			m := formulaIf.FindStringSubmatch(line)
			if m == nil || cpuConditions[m[1]] == "" {
				return nil, fail("want a CPU condition in %s", top)
			}
			pkg = &brewPackage{os: osOf[top], cpu: cpuConditions[m[1]]}
			stack = append(stack, "if "+pkg.cpu)
		case "install", "test":
			if top == "install" {
				pkg.install = append(pkg.install, line)
			} else {
				f.test = append(f.test, line)
			}
		case "caveats":
			if line != "<<~EOS" {
				return nil, fail("caveats: want a heredoc")
			}
			stack = append(stack, "heredoc")
		default: // inside a CPU condition
			if m := formulaString.FindStringSubmatch(line); m != nil && (m[1] == "url" || m[1] == "sha256") {
				if m[1] == "url" {
					pkg.url = m[2]
				} else {
					pkg.sha256 = m[2]
				}
			} else if line == "define_method(:install) do" {
				pkg.install = []string{}
				stack = append(stack, "install")
			} else {
				return nil, fail("not a statement of a platform package")
			}
		}
	}
	if len(stack) > 0 {
		return nil, fmt.Errorf("blocks left open at the end: %v", stack)
	}
	if f.class == "" {
		return nil, errors.New("no class ... < Formula")
	}
	return f, nil
}

// TestParseFormula holds the parser to a formula in the shape GoReleaser
// writes, and to the mistakes it must not let through.
func TestParseFormula(t *testing.T) {
	good := `# typed: false
class Toold < Formula
  desc "d"
  homepage "https://example.com"
  version "1.2.3"

  on_macos do
    if Hardware::CPU.intel?
      url "https://example.com/toold_1.2.3_darwin_amd64.tar.gz"
      sha256 "aa"

      define_method(:install) do
        bin.install "toold"
      end
    end
  end

  on_linux do
    if Hardware::CPU.arm? && Hardware::CPU.is_64_bit?
      url "https://example.com/toold_1.2.3_linux_arm64.tar.gz"
      sha256 "bb"
      define_method(:install) do
        bin.install "toold"
      end
    end
  end

  def caveats
    <<~EOS
      hello
    EOS
  end

  test do
    system "#{bin}/toold", "-version"
  end
end
`
	f, err := parseFormula(good)
	if err != nil {
		t.Fatal(err)
	}
	want := []brewPackage{
		{os: "darwin", cpu: "amd64", url: "https://example.com/toold_1.2.3_darwin_amd64.tar.gz", sha256: "aa", install: []string{`bin.install "toold"`}},
		{os: "linux", cpu: "arm64", url: "https://example.com/toold_1.2.3_linux_arm64.tar.gz", sha256: "bb", install: []string{`bin.install "toold"`}},
	}
	if f.class != "Toold" || f.version != "1.2.3" || !slices.EqualFunc(f.packages, want, func(a, b brewPackage) bool {
		return a.os == b.os && a.cpu == b.cpu && a.url == b.url && a.sha256 == b.sha256 && slices.Equal(a.install, b.install)
	}) || len(f.test) != 1 || !slices.Equal(f.caveats, []string{"hello"}) {
		t.Errorf("parsed %+v", f)
	}
	for name, bad := range map[string]string{
		"unclosed":           strings.TrimSuffix(good, "end\n"),
		"no sha256":          strings.Replace(good, `sha256 "aa"`, "", 1),
		"no install":         strings.Replace(good, "      define_method(:install) do\n        bin.install \"toold\"\n      end\n    end\n  end\n\n  on_linux", "    end\n  end\n\n  on_linux", 1),
		"unknown condition":  strings.Replace(good, "if Hardware::CPU.intel?", "if OS.mac?", 1),
		"url outside a CPU":  strings.Replace(good, `  version "1.2.3"`, `  url "https://example.com/x"`, 1),
		"not a formula":      strings.Replace(good, "< Formula", "< Cask", 1),
		"a stray statement":  strings.Replace(good, `  desc "d"`, `  system "rm", "-rf", "/"`, 1),
		"an end too many":    good + "end\n",
		"two classes":        good + "class Other < Formula\nend\n",
		"an escaped quote":   strings.Replace(good, `desc "d"`, `desc "a \" b"`, 1),
		"a heredoc unclosed": strings.Replace(good, "      hello\n    EOS\n", "      hello\n", 1),
	} {
		if _, err := parseFormula(bad); err == nil {
			t.Errorf("%s: parsed without an error", name)
		}
	}
}

// TestHomebrewFormula: the release snapshot (`make release`, which .ci/run
// runs before the tests) holds a Homebrew formula for toold whose class is
// Toold, with one package for each darwin and linux archive of the
// snapshot: on the right platform and CPU, its url naming the archive and
// its sha256 the one checksums.txt has; each installs the binary
// "toold", which the archive holds at its root; and its test runs
// `toold -version`. Without a snapshot in dist/ it skips (TOOLD_REQUIRE_RELEASE=1:
// fails).
func TestHomebrewFormula(t *testing.T) {
	dist := repoPath("dist")
	src, err := os.ReadFile(filepath.Join(dist, "homebrew", "Formula", "toold.rb"))
	if errors.Is(err, os.ErrNotExist) {
		testpeer.Missing(t, "TOOLD_REQUIRE_RELEASE", "no release snapshot with a Homebrew formula in dist/: run `make release`")
	} else if err != nil {
		t.Fatal(err)
	}
	f, err := parseFormula(string(src))
	if err != nil {
		t.Fatalf("dist/homebrew/Formula/toold.rb: %v", err)
	}
	if f.class != "Toold" || f.desc == "" || f.homepage != "https://github.com/toold/toold" {
		t.Errorf("class %q desc %q homepage %q: want class Toold, a description, the repository", f.class, f.desc, f.homepage)
	}

	sums := map[string]string{} // archive -> sha256
	for _, line := range strings.Split(string(readRepoFile(t, "dist", "checksums.txt")), "\n") {
		if sum, file, ok := strings.Cut(line, "  "); ok {
			sums[file] = sum
		}
	}
	var archives []string
	for file := range sums {
		if m := regexp.MustCompile(`^toold_(.+)_(darwin|linux)_(amd64|arm64)\.tar\.gz$`).FindStringSubmatch(file); m != nil {
			archives = append(archives, file)
			if m[1] != f.version {
				t.Errorf("archive %s is of version %s, the formula of %s", file, m[1], f.version)
			}
		}
	}
	slices.Sort(archives)
	if len(archives) != 4 {
		t.Fatalf("checksums.txt lists %d darwin and linux archives (%v), want 4", len(archives), archives)
	}
	var installed []string
	for _, p := range f.packages {
		name := fmt.Sprintf("toold_%s_%s_%s.tar.gz", f.version, p.os, p.cpu)
		installed = append(installed, name)
		if !strings.HasPrefix(p.url, "https://github.com/toold/toold/releases/download/") || !strings.HasSuffix(p.url, "/"+name) {
			t.Errorf("%s/%s: url %s, want the release download of %s", p.os, p.cpu, p.url, name)
		}
		if want, ok := sums[name]; !ok || p.sha256 != want {
			t.Errorf("%s/%s: sha256 %s, checksums.txt has %q for %s", p.os, p.cpu, p.sha256, want, name)
		}
		if !slices.Equal(p.install, []string{`bin.install "toold"`}) {
			t.Errorf("%s/%s: install %q, want bin.install \"toold\"", p.os, p.cpu, p.install)
		}
		files := archiveFiles(t, filepath.Join(dist, name))
		if mode, ok := files["toold"]; !ok || mode&0o111 == 0 {
			t.Errorf("%s holds no toold at its root: bin.install \"toold\" would fail", name)
		}
		// The README in the archive links to the docs: they travel with it.
		for _, doc := range readmeDocs(t) {
			if _, ok := files[doc]; !ok {
				t.Errorf("%s: README.md links to %s, which the archive does not hold", name, doc)
			}
		}
	}
	slices.Sort(installed)
	if !slices.Equal(installed, archives) {
		t.Errorf("the formula installs %v, the snapshot's darwin and linux archives are %v", installed, archives)
	}
	if !slices.ContainsFunc(f.test, func(l string) bool { return strings.Contains(l, `#{bin}/toold -version`) }) {
		t.Errorf("the formula's test %q does not run toold -version", f.test)
	}
}

// readmeDocs are the files under docs/ that README.md links to.
func readmeDocs(t testing.TB) []string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var docs []string
	for _, m := range regexp.MustCompile(`\]\((docs/[^)#\s]+)`).FindAllStringSubmatch(string(b), -1) {
		if !slices.Contains(docs, m[1]) {
			docs = append(docs, m[1])
		}
	}
	if len(docs) == 0 {
		t.Fatal("README.md links to nothing under docs/: the check would hold nothing")
	}
	return docs
}

// archiveFiles returns the regular files of the tar.gz at path, by name,
// with their modes.
func archiveFiles(t testing.TB, path string) map[string]int64 {
	t.Helper()
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	zr, err := gzip.NewReader(file)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	tr := tar.NewReader(zr)
	files := map[string]int64{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if h.Typeflag == tar.TypeReg {
			files[h.Name] = h.Mode
		}
	}
}
