package command

import (
	"bytes"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/toold/toold/internal/tools"
)

// grepRule is GNU grep's options as an operator would allow a few of them.
var grepRule = ProgramRule{Options: []string{"-e PATTERN", "--regexp=PATTERN", "-i", "--ignore-case", "-n", "-v",
	"--color[=WHEN]", "-C NUM", "--context=NUM", "--binary-files={binary,text}"}, EndOfOptions: true}

// TestOptionValuesAreNotOptions is the bypass and its relatives:
// a value of an option that takes one is never read as an option, and
// the arguments reach the program in a form only one parse fits.
func TestOptionValuesAreNotOptions(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want []string
		kind tools.Kind
	}{
		{"grep -e -- --version", []string{"-e", "--", "--version"}, nil, tools.PermissionError},
		{"grep -e -- -f FILE", []string{"-e", "--", "-f", "/etc/shadow"}, nil, tools.PermissionError},
		{"-e takes -- as its value", []string{"-e", "--", "x"}, []string{"-e", "--", "--", "x"}, ""},
		{"-e takes --version as its value", []string{"-e", "--version", "x"}, []string{"-e", "--version", "--", "x"}, ""},
		{"-eVAL", []string{"-e-f", "x"}, []string{"-e", "-f", "--", "x"}, ""},
		{"--regexp=VAL", []string{"--regexp=--version"}, []string{"--regexp=--version"}, ""},
		{"--regexp VAL", []string{"--regexp", "-f"}, []string{"--regexp=-f"}, ""},
		{"--reg=VAL abbreviation", []string{"--reg=a", "x"}, []string{"--regexp=a", "--", "x"}, ""},
		{"--i abbreviation", []string{"--i", "x"}, []string{"--ignore-case", "--", "x"}, ""},
		{"--c ambiguous", []string{"--c=1", "x"}, nil, tools.PermissionError},
		{"-ie VAL cluster", []string{"-ie", "-v", "x"}, []string{"-i", "-e", "-v", "--", "x"}, ""},
		{"-ineVAL cluster", []string{"-inePAT"}, []string{"-i", "-n", "-e", "PAT"}, ""},
		{"cluster with a forbidden flag", []string{"-ir", "x"}, nil, tools.PermissionError},
		{"-- ends the options", []string{"-i", "--", "-v", "--version"}, []string{"-i", "--", "-v", "--version"}, ""},
		{"options after operands (permutation)", []string{"x", "-n", "y"}, []string{"-n", "--", "x", "y"}, ""},
		{"- is an operand", []string{"-", "-n"}, []string{"-n", "--", "-"}, ""},
		{"missing value", []string{"-n", "-e"}, nil, tools.PermissionError},
		{"missing long value", []string{"--regexp"}, nil, tools.PermissionError},
		{"value on a flag", []string{"--ignore-case=yes"}, nil, tools.PermissionError},
		{"optional value attached", []string{"--color=always", "--col"}, []string{"--color=always", "--color"}, ""},
		{"optional value never the next word", []string{"--color", "never"}, []string{"--color", "--", "never"}, ""},
		{"empty value kept apart", []string{"-e", "", "x"}, []string{"-e", "", "--", "x"}, ""},
		{"value from a set", []string{"--binary-files=text"}, []string{"--binary-files=text"}, ""},
		{"value outside the set", []string{"--binary-files=without-match"}, nil, tools.PermissionError},
		{"unknown long option", []string{"--file=/etc/shadow"}, nil, tools.PermissionError},
		{"--=x abbreviates nothing unique", []string{"--=x"}, nil, tools.PermissionError},
		{"non-ASCII short option", []string{"-\xff"}, nil, tools.PermissionError},
	}
	opts, err := compileOptions(grepRule.Options)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := checkArgs("grep", grepRule, opts, c.args)
			checkOutcome(t, got, err, c.want, c.kind)
			if err == nil {
				// The canonical form parses back to itself.
				again, err := checkArgs("grep", grepRule, opts, got)
				checkOutcome(t, again, err, got, "")
			}
		})
	}
}

// TestSingleDashLongOptions: find's and Go's flag package's options are
// matched whole before a word is read as a cluster, and their values are
// values.
func TestSingleDashLongOptions(t *testing.T) {
	find := ProgramRule{Options: []string{"-name PATTERN", "-type {f,d}", "-maxdepth N", "-print"}}
	goTest := ProgramRule{Subcommands: []string{"test"}, Options: []string{"-run=", "-count=N", "-v[=BOOL]"}}
	cases := []argCase{
		{"find -name value is a value", find, []string{".", "-name", "-delete", "-print"}, []string{"-name", "-delete", "-print", "."}, ""},
		{"find -exec refused", find, []string{".", "-exec", "sh", ";"}, nil, tools.PermissionError},
		{"find -type outside its set", find, []string{".", "-type", "l"}, nil, tools.PermissionError},
		{"find -name= attached", find, []string{"-name=x"}, []string{"-name", "x"}, ""},
		{"go test -run=X -count 1 -v", goTest, []string{"test", "-run=TestX", "-count", "1", "-v", "./..."}, []string{"test", "-run", "TestX", "-count", "1", "-v", "./..."}, ""},
		{"go test -v=false", goTest, []string{"test", "-v=false"}, []string{"test", "-v=false"}, ""},
		{"go test -exec refused", goTest, []string{"test", "-exec=sh"}, nil, tools.PermissionError},
		{"go test -run takes -exec as its value", goTest, []string{"test", "-run", "-exec=x"}, []string{"test", "-run", "-exec=x"}, ""},
	}
	runArgCases(t, cases)
}

func TestCompileOptions(t *testing.T) {
	for _, bad := range []string{"e", "-", "---x", "-e=VALUE", "-e=", "--regexp VALUE", "--x[VALUE]", "-name[X]", "--x=value", "-e VALUE extra", "--a=1"} {
		if _, err := compileOptions([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := compileOptions([]string{"-v", "-v"}); err == nil {
		t.Error("a duplicate accepted")
	}
	for _, good := range []string{"-v", "--max-count=", "--max-count=NUM", "-C NUM", "-c[N]", "--color[=WHEN]", "--x={a,b}", "-?", "*",
		"-name PATTERN", "-count=", "-run=REGEXP", "-v[=BOOL]", "-type {f,d}"} {
		if _, err := compileOptions([]string{good}); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
}

// getoptTable is a random allow-list: its spec for toold and the
// optstring and longopts of util-linux getopt(1) for the same options.
type getoptTable struct {
	specs            []string
	optstring, longs string
}

var shortPool = []byte("abcdefgh")
var longPool = []string{"color", "colour", "count", "context", "regexp", "recursive", "re", "file", "files-with-matches", "x"}

func randomTable(r *rand.Rand) getoptTable {
	var t getoptTable
	var longs []string
	for _, c := range shortPool {
		switch r.IntN(4) {
		case 1:
			t.specs, t.optstring = append(t.specs, "-"+string(c)), t.optstring+string(c)
		case 2:
			t.specs, t.optstring = append(t.specs, "-"+string(c)+" V"), t.optstring+string(c)+":"
		case 3:
			t.specs, t.optstring = append(t.specs, "-"+string(c)+"[V]"), t.optstring+string(c)+"::"
		}
	}
	for _, n := range longPool {
		switch r.IntN(4) {
		case 1:
			t.specs, longs = append(t.specs, "--"+n), append(longs, n)
		case 2:
			t.specs, longs = append(t.specs, "--"+n+"=V"), append(longs, n+":")
		case 3:
			t.specs, longs = append(t.specs, "--"+n+"[=V]"), append(longs, n+"::")
		}
	}
	t.longs = strings.Join(longs, ",")
	return t
}

// wordPool builds hostile argument lists from the pieces getopt cares for.
var wordPool = []string{"--", "-", "x", "", "-a", "-b", "-ab", "-ba", "-abc", "-c", "-cx", "-e--", "-f", "-h", "-z",
	"--c", "--co", "--col", "--color", "--color=", "--color=x", "--colour=-a", "--count", "--cont=3", "--re", "--reg",
	"--regexp", "--regexp=--", "--rec", "--file", "--file=-", "--files", "--x", "--x=", "--=", "--=x", "--nope", "-\xff", "=", "--version"}

// referenceParse runs util-linux getopt(1), the reference getopt_long,
// and returns its normalised output split into words, or ok false when it
// reports an error.
func referenceParse(t testing.TB, tab getoptTable, args []string) (words []string, ok bool) {
	t.Helper()
	cmd := exec.Command("/usr/bin/getopt", append([]string{"-o", tab.optstring, "-l", tab.longs, "-n", "ref", "--"}, args...)...)
	cmd.Env = []string{"LC_ALL=C"} // no POSIXLY_CORRECT, no GETOPT_COMPATIBLE
	var out bytes.Buffer
	cmd.Stdout = &out
	err := cmd.Run()
	if ee, isExit := err.(*exec.ExitError); isExit && ee.ExitCode() == 1 {
		return nil, false
	}
	if err != nil {
		t.Fatalf("getopt: %v", err)
	}
	return splitGetopt(t, out.String()), true
}

// splitGetopt reads getopt's output: words separated by spaces, values
// and operands in single quotes, a quote inside them closing the quotes,
// escaped with a backslash, and opening them again.
func splitGetopt(t testing.TB, s string) []string {
	s = strings.TrimSuffix(strings.TrimPrefix(s, " "), "\n")
	words := []string{}
	var cur strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == ' ':
			words = append(words, cur.String())
			cur.Reset()
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				t.Fatalf("getopt output %q: unclosed quote", s)
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
		default:
			cur.WriteByte(c)
		}
	}
	return append(words, cur.String())
}

// toGetoptForm writes toold's parse as getopt prints one: each option
// with its value as the next word (” for an absent optional one), then
// "--" and the operands.
func toGetoptForm(opts []parsedOpt, operands []string) []string {
	var out []string
	for _, o := range opts {
		out = append(out, o.spec.name)
		if o.spec.takes != takesNone {
			out = append(out, o.value)
		}
	}
	return append(append(out, "--"), operands...)
}

// compareWithGetopt checks one argument list against the reference. The
// one deliberate difference: an abbreviation of several long options that
// take the same kind of value, which glibc resolves to the first of them
// (getopt(1) gives all its long options one val), toold refuses.
func compareWithGetopt(t testing.TB, tab getoptTable, args []string) {
	t.Helper()
	table, err := compileOptions(tab.specs)
	if err != nil {
		t.Fatalf("%q: %v", tab.specs, err)
	}
	opts, operands, err := table.parse("prog", args)
	want, ok := referenceParse(t, tab, args)
	switch {
	case err != nil && ok:
		if strings.Contains(err.Error(), "ambiguous") {
			return
		}
		t.Fatalf("-o %q -l %q %q: toold refused (%v), getopt parsed %q", tab.optstring, tab.longs, args, err, want)
	case err == nil && !ok:
		t.Fatalf("-o %q -l %q %q: toold parsed %q, getopt refused", tab.optstring, tab.longs, args, toGetoptForm(opts, operands))
	case err == nil:
		if got := toGetoptForm(opts, operands); !slices.Equal(got, want) {
			t.Fatalf("-o %q -l %q %q:\n toold  %q\n getopt %q", tab.optstring, tab.longs, args, got, want)
		}
	}
}

func haveGetopt(t testing.TB) {
	if _, err := os.Stat("/usr/bin/getopt"); err != nil {
		t.Skip("util-linux getopt is not installed")
	}
}

// TestGetoptDifferential parses a generated corpus of hostile argument
// lists under random allow-lists with toold and with util-linux getopt.
func TestGetoptDifferential(t *testing.T) {
	haveGetopt(t)
	r := rand.New(rand.NewPCG(15, 5))
	n := 600
	if testing.Short() {
		n = 200
	}
	for range n {
		tab := randomTable(r)
		args := make([]string, r.IntN(6))
		for i := range args {
			args[i] = wordPool[r.IntN(len(wordPool))]
		}
		compareWithGetopt(t, tab, args)
	}
}

// FuzzGetopt holds the parser against getopt(1) on arbitrary argument
// lists (NUL-separated in one string) under a table chosen by seed.
func FuzzGetopt(f *testing.F) {
	haveGetopt(f)
	for i, s := range []string{"-e\x00--\x00--version", "--reg=a\x00x", "-ie\x00-v", "x\x00-n\x00--\x00-y", "--=\x00-", "-c\x00never"} {
		f.Add(uint64(i), s)
	}
	f.Fuzz(func(t *testing.T, seed uint64, joined string) {
		args := strings.Split(joined, "\x00")
		if len(args) > 12 {
			t.Skip()
		}
		for _, a := range args {
			if strings.ContainsRune(a, 0) || len(a) > 64 {
				t.Skip()
			}
		}
		tab := randomTable(rand.New(rand.NewPCG(seed, 0)))
		compareWithGetopt(t, tab, args)
	})
}
