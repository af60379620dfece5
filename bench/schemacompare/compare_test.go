// Package schemacompare measures the JSON Schema validator toold uses
// (santhosh-tekuri/jsonschema/v6) against the one the original design card
// named (xeipuuv/gojsonschema), side by side in one run, on a typical tool
// schema. It is its own module so gojsonschema never enters toold's go.mod:
//
//	cd bench/schemacompare && go test -bench . -benchmem -count 5
package schemacompare

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	santhosh "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/xeipuuv/gojsonschema"
)

// schema is read_file-like: the shape most tool schemas have. Draft-07
// keywords only, so both validators read it the same way.
const schema = `{
  "type": "object",
  "properties": {
    "paths": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1, "maxItems": 20},
    "offset": {"type": "integer", "minimum": 1, "default": 1},
    "limit": {"type": "integer", "minimum": 0},
    "mode": {"enum": ["text", "lines"]},
    "options": {"type": "object", "properties": {"follow": {"type": "boolean"}}, "additionalProperties": false}
  },
  "required": ["paths"],
  "additionalProperties": false
}`

var (
	valid   = `{"paths":["src/main.go","README.md"],"offset":10,"limit":50,"mode":"lines","options":{"follow":true}}`
	invalid = `{"paths":[],"offset":0,"limit":-1,"mode":"words","options":{"follow":"yes"},"extra":1}`
)

func compileSanthosh(tb testing.TB) *santhosh.Schema {
	doc, err := santhosh.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		tb.Fatal(err)
	}
	c := santhosh.NewCompiler()
	c.DefaultDraft(santhosh.Draft7)
	if err := c.AddResource("schema.json", doc); err != nil {
		tb.Fatal(err)
	}
	s, err := c.Compile("schema.json")
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func compileGojsonschema(tb testing.TB) *gojsonschema.Schema {
	s, err := gojsonschema.NewSchema(gojsonschema.NewStringLoader(schema))
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func decode(tb testing.TB, s string) any {
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		tb.Fatal(err)
	}
	return v
}

// TestSameVerdicts: the two agree, so the benchmark compares like with like.
func TestSameVerdicts(t *testing.T) {
	s, g := compileSanthosh(t), compileGojsonschema(t)
	for _, in := range []string{valid, invalid} {
		sOK := s.Validate(decode(t, in)) == nil
		r, err := g.Validate(gojsonschema.NewGoLoader(decode(t, in)))
		if err != nil {
			t.Fatal(err)
		}
		if sOK != r.Valid() {
			t.Errorf("%s: santhosh %v, gojsonschema %v", in, sOK, r.Valid())
		}
	}
}

func BenchmarkValidate(b *testing.B) {
	s, g := compileSanthosh(b), compileGojsonschema(b)
	for _, tc := range []struct {
		name, in string
	}{{"valid", valid}, {"invalid", invalid}} {
		v := decode(b, tc.in)
		b.Run("santhosh/"+tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = s.Validate(v)
			}
		})
		b.Run("gojsonschema/"+tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := g.Validate(gojsonschema.NewGoLoader(v)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
