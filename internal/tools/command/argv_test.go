package command

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/toold/toold/internal/tools"
)

func TestArgYAMLForms(t *testing.T) {
	var got []Arg
	src := "- git\n- '--max-count={{.n}}'\n- {arg: '--author={{.a}}', when: a}\n- {splice: files, each: '--file={{.}}'}\n"
	if err := yaml.Unmarshal([]byte(src), &got); err != nil {
		t.Fatal(err)
	}
	want := []Arg{{Arg: "git"}, {Arg: "--max-count={{.n}}"}, {Arg: "--author={{.a}}", When: "a"}, {Splice: "files", Each: "--file={{.}}"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if err := yaml.Unmarshal([]byte("- {splcie: files}\n"), &got); err == nil || !strings.Contains(err.Error(), "unknown argv key") {
		t.Errorf("a misspelt key: err = %v", err)
	}
}

func TestRender(t *testing.T) {
	base := []Arg{{Arg: "prog"}}
	cases := []struct {
		name   string
		argv   []Arg
		params string
		want   []string
		kind   tools.Kind // expected error kind, "" for success
	}{
		{"literal and value", []Arg{{Arg: "log"}, {Arg: "--max-count={{.n}}"}}, `{"n":20}`, []string{"prog", "log", "--max-count=20"}, ""},
		{"big number kept as written", []Arg{{Arg: "-n{{.n}}"}}, `{"n":12345678901234567890}`, []string{"prog", "-n12345678901234567890"}, ""},
		{"metacharacters literal", []Arg{{Arg: "{{.x}}"}}, `{"x":"a b; $(id) | c"}`, []string{"prog", "a b; $(id) | c"}, ""},
		{"when absent", []Arg{{Arg: "--a={{.a}}", When: "a"}, {Arg: "x"}}, `{}`, []string{"prog", "x"}, ""},
		{"when false", []Arg{{Arg: "--v", When: "v"}}, `{"v":false}`, []string{"prog"}, ""},
		{"when true", []Arg{{Arg: "--v", When: "v"}}, `{"v":true}`, []string{"prog", "--v"}, ""},
		{"splice", []Arg{{Arg: "--"}, {Splice: "f"}}, `{"f":["a b","-c",""]}`, []string{"prog", "--", "a b", "-c", ""}, ""},
		{"splice each", []Arg{{Splice: "f", Each: "--file={{.}}"}}, `{"f":["a","-b"]}`, []string{"prog", "--file=a", "--file=-b"}, ""},
		{"splice absent", []Arg{{Splice: "f"}}, `{}`, []string{"prog"}, ""},
		{"splice null", []Arg{{Splice: "f"}}, `{"f":null}`, []string{"prog"}, ""},
		{"empty literal", []Arg{{Arg: ""}}, `{}`, []string{"prog", ""}, ""},
		{"dash from a parameter", []Arg{{Arg: "{{.p}}"}}, `{"p":"--output=/tmp/x"}`, nil, tools.SecurityError},
		{"dash spliced", []Arg{{Splice: "f"}}, `{"f":["-c"]}`, nil, tools.SecurityError},
		{"dash after --", []Arg{{Arg: "--"}, {Arg: "{{.p}}"}}, `{"p":"--output=/tmp/x"}`, []string{"prog", "--", "--output=/tmp/x"}, ""},
		{"dash allowed", []Arg{{Arg: "{{.p}}", AllowDash: true}}, `{"p":"-v"}`, []string{"prog", "-v"}, ""},
		{"missing parameter", []Arg{{Arg: "{{.p}}"}}, `{}`, nil, tools.ValidationError},
		{"object spliced", []Arg{{Splice: "f"}}, `{"f":[{"a":1}]}`, nil, tools.ValidationError},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			av, err := compileArgv(append(append([]Arg{}, base...), c.argv...))
			if err != nil {
				t.Fatal(err)
			}
			params, err := decodeParams(json.RawMessage(c.params), nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := av.render(params)
			checkOutcome(t, got, err, c.want, c.kind)
		})
	}
}

func TestCompileRefuses(t *testing.T) {
	cases := map[string][]Arg{
		"program from a parameter": {{Arg: "{{.p}}"}},
		"conditional program":      {{Arg: "git", When: "x"}},
		"bad template":             {{Arg: "git"}, {Arg: "{{.x"}},
		"arg and splice":           {{Arg: "git"}, {Arg: "a", Splice: "b"}},
		"each without splice":      {{Arg: "git"}, {Each: "{{.}}"}},
		"empty":                    {},
	}
	for name, argv := range cases {
		if _, err := compileArgv(argv); err == nil {
			t.Errorf("%s: compiled", name)
		}
	}
}

func TestDefaultsApplied(t *testing.T) {
	d, err := tools.SchemaDefaults([]byte(`{"type":"object","properties":{"n":{"type":"integer","default":20},"s":{"type":"string"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := decodeParams(json.RawMessage(`{"s":"x"}`), d)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"n": json.Number("20"), "s": "x"}, p); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// FuzzRender feeds untrusted parameter values through the argv template:
// each value must come out as exactly the argument it was put in, never
// split, never joined, never interpreted.
func FuzzRender(f *testing.F) {
	for _, s := range []string{"", "a b", "; id", "$(id)", "`id`", "-rf", "--", "{{.x}}", "\x00", "\xff\xfe", "a\nb"} {
		f.Add(s, s+"2")
	}
	av, err := compileArgv([]Arg{{Arg: "prog"}, {Arg: "--"}, {Arg: "{{.a}}"}, {Arg: "x={{.a}}"}, {Splice: "l"}})
	if err != nil {
		f.Fatal(err)
	}
	guarded, err := compileArgv([]Arg{{Arg: "prog"}, {Arg: "{{.a}}"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		raw, err := json.Marshal(map[string]any{"a": a, "l": []string{a, b}})
		if err != nil {
			t.Skip()
		}
		params, err := decodeParams(raw, nil)
		if err != nil {
			t.Fatal(err)
		}
		// JSON turns invalid UTF-8 into U+FFFD: compare with what arrives.
		a, b = params["a"].(string), params["l"].([]any)[1].(string)
		got, err := av.render(params)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"prog", "--", a, "x=" + a, a, b}, got); diff != "" {
			t.Fatalf("(-want +got):\n%s", diff)
		}
		got, err = guarded.render(params)
		if strings.HasPrefix(a, "-") != (err != nil) {
			t.Fatalf("%q: got %q, err %v", a, got, err)
		}
	})
}
