package api_test

import (
	"slices"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/go-cmp/cmp"

	"github.com/toold/toold/api"
	"github.com/toold/toold/internal/tools"
)

// TestErrorCodesMatchTools: the contract lists exactly the codes toold
// declares (tools.Codes), no more, no fewer, so a client reading
// ErrorCode's x-codes knows every code it can meet.
func TestErrorCodesMatchTools(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	ref := doc.Components.Schemas["ErrorCode"]
	if ref == nil || ref.Value == nil {
		t.Fatal("components.schemas.ErrorCode is missing")
	}
	listed, ok := ref.Value.Extensions["x-codes"].(map[string]any)
	if !ok {
		t.Fatalf("ErrorCode's x-codes is %T, want a map of code to meaning", ref.Value.Extensions["x-codes"])
	}
	var inSpec []string
	for code, meaning := range listed {
		if s, _ := meaning.(string); s == "" {
			t.Errorf("x-codes.%s says nothing about what it means", code)
		}
		inSpec = append(inSpec, code)
	}
	var declared []string
	for _, c := range tools.Codes {
		declared = append(declared, string(c))
	}
	slices.Sort(inSpec)
	slices.Sort(declared)
	if d := cmp.Diff(declared, inSpec); d != "" {
		t.Errorf("api/openapi.yaml's ErrorCode x-codes differ from tools.Codes (-declared +listed):\n%s", d)
	}
}
