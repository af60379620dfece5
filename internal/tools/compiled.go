package tools

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/toold/toold/internal/strictjson"
)

// Schema is a compiled JSON Schema of one of a tool's values: its
// arguments, its result, or an answer a paused call waits for (a person's
// input). The registry compiles a tool's; a tool that asks for an answer
// compiles the answer's when it is asked.
type Schema struct{ s *jsonschema.Schema }

// CompileSchema compiles the schema of a tool's value — which is
// "parameters", "output" or "answer", and names it in errors — with draft
// 2020-12 as the default draft, format assertions on, and no loader: a
// "$ref" may point only inside the schema itself, never to a file or URL
// (a schema from the configuration or a caller must not make toold read
// local files or fetch from the network).
func CompileSchema(tool, which string, raw json.RawMessage) (*Schema, error) {
	if len(raw) == 0 {
		return nil, fmt.Errorf("%s schema is missing", which)
	}
	doc, err := strictjson.Decode(raw, 128)
	if err != nil {
		return nil, fmt.Errorf("%s schema is not valid JSON: %v", which, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(jsonschema.SchemeURLLoader{})
	url := "toold:///tools/" + tool + "/" + which + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("%s schema: %v", which, err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("%s schema is invalid: %v", which, err)
	}
	return &Schema{s}, nil
}

// Compiled is the compiled form, for a reader that walks the schema (the
// registry's renderings and example calls).
func (s *Schema) Compiled() *jsonschema.Schema { return s.s }

// Validate returns every failing field of the decoded value v, each at its
// JSON pointer, sorted by pointer; nil when v is valid.
func (s *Schema) Validate(v any) []FieldError { return fieldErrors(s.s.Validate(v)) }

// UnknownParameter is the message of a property the schema does not take.
const UnknownParameter = "is not a known parameter"

var printer = message.NewPrinter(language.English)

func fieldErrors(err error) []FieldError {
	if err == nil {
		return nil
	}
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return []FieldError{{Pointer: "", Message: err.Error()}}
	}
	var out []FieldError
	collect(ve, &out)
	slices.SortStableFunc(out, func(a, b FieldError) int { return strings.Compare(a.Pointer, b.Pointer) })
	return slices.Compact(out)
}

// collect flattens the error tree to its leaves, one entry per field: a
// missing or unknown property is reported at its own pointer, not its
// parent's, so a caller can see exactly which key to add or remove.
func collect(ve *jsonschema.ValidationError, out *[]FieldError) {
	if len(ve.Causes) > 0 {
		for _, c := range ve.Causes {
			collect(c, out)
		}
		return
	}
	at := schemaPointer(ve.InstanceLocation)
	switch k := ve.ErrorKind.(type) {
	case *kind.Required:
		for _, m := range k.Missing {
			*out = append(*out, FieldError{Pointer: at + "/" + PointerToken(m), Message: "is required"})
		}
	case *kind.AdditionalProperties:
		for _, p := range k.Properties {
			*out = append(*out, FieldError{Pointer: at + "/" + PointerToken(p), Message: UnknownParameter})
		}
	case *kind.Type:
		*out = append(*out, FieldError{Pointer: at, Message: fmt.Sprintf("must be %s, not %s", strings.Join(k.Want, " or "), k.Got)})
	default:
		*out = append(*out, FieldError{Pointer: at, Message: ve.ErrorKind.LocalizedString(printer)})
	}
}

func schemaPointer(loc []string) string {
	var b strings.Builder
	for _, p := range loc {
		b.WriteString("/" + PointerToken(p))
	}
	return b.String()
}
