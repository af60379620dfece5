package fs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toold/toold/internal/sanitize"
	"github.com/toold/toold/internal/tools"
)

// testWS is a workspace inside a parent temp dir whose sibling "outside"
// holds a canary no tool may read or change.
type testWS struct {
	w       *Workspace
	dir     string // the workspace
	outside string // sibling of dir, outside the workspace
	canary  string // content of outside/canary.txt
}

func newTestWS(t testing.TB, opts Options) *testWS {
	t.Helper()
	parent := t.TempDir()
	tw := &testWS{dir: filepath.Join(parent, "ws"), outside: filepath.Join(parent, "outside"),
		canary: "CANARY-" + strings.Repeat("s3cr3t", 4)}
	for _, d := range []string{tw.dir, tw.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(tw.outside, "canary.txt"), []byte(tw.canary+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := New(tw.dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	tw.w = w
	return tw
}

// write creates files (and their directories) inside the workspace.
func (tw *testWS) write(t testing.TB, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(tw.dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func (tw *testWS) read(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(tw.dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (tw *testWS) tool(t testing.TB, name string) tools.Tool {
	t.Helper()
	for _, tl := range tw.w.Tools() {
		if tl.Spec().Name == name {
			return tl
		}
	}
	t.Fatalf("no tool %s", name)
	return nil
}

// exec runs a tool the way the dispatcher does and checks every successful
// result against the tool's output schema.
func (tw *testWS) exec(t testing.TB, name, args string) (any, error) {
	t.Helper()
	tl := tw.tool(t, name)
	res, err := tl.Execute(context.Background(), tools.NewCall(json.RawMessage(args), "req-1", "test", nil))
	if err == nil {
		if err := validate(tl.Spec().Output, res); err != nil {
			t.Errorf("%s result does not fit its output schema: %v", name, err)
		}
	}
	return res, err
}

// checkOutside fails the test if anything outside the workspace changed or
// if the canary's content shows up in text a tool produced.
func (tw *testWS) checkOutside(t testing.TB, produced ...any) {
	t.Helper()
	entries, err := os.ReadDir(tw.outside)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "canary.txt" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("outside dir changed: %v", names)
	}
	if b, _ := os.ReadFile(filepath.Join(tw.outside, "canary.txt")); string(b) != tw.canary+"\n" {
		t.Errorf("canary changed: %q", b)
	}
	for _, p := range produced {
		b, _ := json.Marshal(p)
		if e, ok := p.(error); ok && e != nil {
			b = []byte(e.Error())
			if te, ok := tools.AsError(e); ok {
				b = append(b, te.Suggestion...)
			}
		}
		if bytes.Contains(b, []byte("s3cr3t")) {
			t.Errorf("canary content leaked: %s", b)
		}
	}
}

// wantErr checks an error's kind and code.
func wantErr(t testing.TB, err error, kind tools.Kind, code string) *tools.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("want %s/%s, got success", kind, code)
	}
	te, ok := tools.AsError(err)
	if !ok {
		t.Fatalf("want %s/%s, got untyped error %v", kind, code, err)
	}
	if diff := cmp.Diff(string(kind)+"/"+code, string(te.Kind)+"/"+string(te.Code)); diff != "" {
		t.Fatalf("error kind/code (-want +got):\n%s\nmessage: %s", diff, te.Message)
	}
	if te.Kind != tools.SystemError && (te.Message == "" || te.Suggestion == "") {
		t.Errorf("error lacks a message or suggestion: %+v", te)
	}
	return te
}

func mustOK(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// validate checks v against a JSON Schema the way the registry compiles it.
func validate(schema json.RawMessage, v any) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource("mem:///s.json", doc); err != nil {
		return err
	}
	s, err := c.Compile("mem:///s.json")
	if err != nil {
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return err
	}
	return s.Validate(inst)
}

// sanitized is what a caller gets of a tool's answer to args: the result
// through the output sanitizer san, as the pipeline serves it.
func (tw *testWS) sanitized(t testing.TB, san *sanitize.Sanitizer, name, args string) []byte {
	t.Helper()
	res, err := tw.exec(t, name, args)
	mustOK(t, err)
	data, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	spec := tw.tool(t, name).Spec()
	out, _, err := san.Output(context.Background(), &spec, data)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// shownSHA is the sha256 read_file gives for name, as a caller takes it.
func (tw *testWS) shownSHA(t testing.TB, name string) string {
	t.Helper()
	res, err := tw.exec(t, "read_file", `{"paths":[`+jsonString(name)+`]}`)
	mustOK(t, err)
	return res.(readResult).Files[0].SHA256
}
