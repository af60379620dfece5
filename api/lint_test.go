package api_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/toold/toold/api"
	"github.com/toold/toold/internal/testpeer"
)

// TestEveryOperationHasAnID: client generators name their methods after
// operationIds; every operation has one, unique.
func TestEveryOperationHasAnID(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			where := method + " " + path
			switch prev, dup := seen[op.OperationID]; {
			case op.OperationID == "":
				t.Errorf("%s has no operationId", where)
			case dup:
				t.Errorf("%s and %s share the operationId %q", where, prev, op.OperationID)
			}
			seen[op.OperationID] = where
		}
	}
}

// npmTool is a program of test/openapi's pinned npm packages. Without them
// the test skips, saying how to install them; with TOOLD_REQUIRE_NPM set
// (CI, make test-all) it fails instead.
func npmTool(t *testing.T, name string) string {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join("..", "test", "openapi", "node_modules", ".bin", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		msg := "test/openapi's npm packages are not installed (" + name + " missing); run: npm ci --prefix test/openapi (or make deps)"
		testpeer.Missing(t, "TOOLD_REQUIRE_NPM", msg)
	}
	return bin
}

func run(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true")
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("%s %s: %v\n%s\n%s", filepath.Base(name), strings.Join(args, " "), err, out, stderr)
	}
	return out
}

// TestOpenAPIRedocly: Redocly's recommended rules find nothing in the
// contract (test/openapi/redocly.yaml says which findings are skipped, and
// why).
func TestOpenAPIRedocly(t *testing.T) {
	bin := npmTool(t, "redocly")
	out := run(t, bin, "lint", "--config", "test/openapi/redocly.yaml", "--format", "json", "api/openapi.yaml")
	var res struct {
		Totals   struct{ Errors, Warnings int }
		Problems []struct {
			RuleID   string `json:"ruleId"`
			Message  string
			Location []struct{ Pointer string }
		}
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("redocly's report: %v\n%s", err, out)
	}
	for _, p := range res.Problems {
		where := ""
		if len(p.Location) > 0 {
			where = p.Location[0].Pointer
		}
		t.Errorf("redocly %s at %s: %s", p.RuleID, where, p.Message)
	}
	if res.Totals.Errors+res.Totals.Warnings > 0 {
		t.Errorf("redocly: %d errors, %d warnings", res.Totals.Errors, res.Totals.Warnings)
	}
}

// TestOpenAPISpectral: Spectral's OpenAPI ruleset finds nothing, not even
// a warning.
func TestOpenAPISpectral(t *testing.T) {
	bin := npmTool(t, "spectral")
	out := run(t, bin, "lint", "--ruleset", "test/openapi/.spectral.yaml", "--format", "json", "--fail-severity", "hint", "--quiet", "api/openapi.yaml")
	var problems []struct {
		Code    string
		Message string
		Path    []any
	}
	if s := strings.TrimSpace(string(out)); s != "" {
		if err := json.Unmarshal([]byte(s), &problems); err != nil {
			t.Fatalf("spectral's report: %v\n%s", err, out)
		}
	}
	for _, p := range problems {
		t.Errorf("spectral %s at %v: %s", p.Code, p.Path, p.Message)
	}
}

// TestOpenAPIClientCompiles generates TypeScript types from the contract
// with openapi-typescript and compiles a typed client that uses them
// (test/openapi/client.ts) with tsc --strict: a client generator can work
// from the contract.
func TestOpenAPIClientCompiles(t *testing.T) {
	gen, tsc := npmTool(t, "openapi-typescript"), npmTool(t, "tsc")
	dir := t.TempDir()
	types := filepath.Join(dir, "toold.d.ts")
	run(t, gen, "api/openapi.yaml", "--redocly", "test/openapi/redocly.yaml", "-o", types)
	client, err := filepath.Abs(filepath.Join("..", "test", "openapi", "client.ts"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{
		"compilerOptions": map[string]any{
			"strict": true, "noEmit": true, "target": "es2022", "module": "esnext", "moduleResolution": "bundler",
			"skipLibCheck": false, "noUnusedLocals": true, "lib": []string{"es2022", "dom"},
			"paths": map[string]any{"toold-api": []string{types}},
		},
		"files": []string{client, types},
	}
	b, _ := json.Marshal(cfg)
	tsconfig := filepath.Join(dir, "tsconfig.json")
	if err := os.WriteFile(tsconfig, b, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, tsc, "-p", tsconfig)
}
