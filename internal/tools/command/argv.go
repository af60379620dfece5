package command

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"text/template"
	"text/template/parse"

	"go.yaml.in/yaml/v3"

	"github.com/toold/toold/internal/tools"
)

// Arg is one element of a declarative tool's argv. In YAML it is either a
// string, a Go text/template rendered into exactly one argument:
//
//   - "--max-count={{.max_count}}"
//
// or a mapping of one of two forms:
//
//   - {arg: "--author={{.author}}", when: author}  # only when the parameter is set
//   - {splice: files}                             # each item of an array: one argument
//   - {splice: files, each: "--file={{.}}"}        # each item through a template
//
// A rendered argument is never split or interpreted by a shell. An argument
// whose text starts with a parameter's value (the template begins with an
// action) may not start with "-" unless a literal "--" came before it or it
// sets allow_dash: so "{{.path}}" cannot become an option by accident.
type Arg struct {
	Arg       string `yaml:"arg"`
	When      string `yaml:"when"`
	Splice    string `yaml:"splice"`
	Each      string `yaml:"each"`
	AllowDash bool   `yaml:"allow_dash"`
}

// UnmarshalYAML accepts the string and the mapping forms, refusing unknown
// keys (toold's loader also refuses them; this keeps the type strict alone).
func (a *Arg) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		return n.Decode(&a.Arg)
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: an argv element is a string or a mapping (arg/when/splice/each/allow_dash)", n.Line)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		switch k := n.Content[i].Value; k {
		case "arg", "when", "splice", "each", "allow_dash":
		default:
			return fmt.Errorf("line %d: unknown argv key %q (known: arg, when, splice, each, allow_dash)", n.Content[i].Line, k)
		}
	}
	type plain Arg // without the method, so Decode does not recurse
	return n.Decode((*plain)(a))
}

// argv is a compiled argv template.
type argv struct {
	program string
	elems   []argElem
}

type argElem struct {
	tmpl      *template.Template // one argument; nil for a splice
	when      string
	splice    string
	each      *template.Template // per spliced item; nil passes items as they are
	dashFree  bool               // the output cannot start with a parameter's "-"
	literal   string             // the text when the element has no action
	isLiteral bool
}

// compileArgv parses every element; the program must be literal text so the
// operator, never a caller, chooses what runs.
func compileArgv(args []Arg) (*argv, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("argv is empty")
	}
	out := &argv{}
	for i, a := range args {
		e, err := compileElem(a)
		if err != nil {
			return nil, fmt.Errorf("argv[%d]: %w", i, err)
		}
		if i == 0 {
			if !e.isLiteral || e.when != "" || e.literal == "" {
				return nil, fmt.Errorf("argv[0] must be the program as literal text")
			}
			out.program = e.literal
			continue
		}
		out.elems = append(out.elems, e)
	}
	return out, nil
}

func compileElem(a Arg) (argElem, error) {
	e := argElem{when: a.When, splice: a.Splice}
	switch {
	case a.Splice != "" && a.Arg != "":
		return e, fmt.Errorf("use either arg or splice, not both")
	case a.Splice != "":
		if a.Each == "" {
			e.dashFree = a.AllowDash
			return e, nil
		}
		t, lead, err := parseTemplate(a.Each)
		e.each, e.dashFree = t, a.AllowDash || lead
		return e, err
	case a.Each != "":
		return e, fmt.Errorf("each needs splice")
	}
	t, lead, err := parseTemplate(a.Arg)
	if err != nil {
		return e, err
	}
	e.tmpl, e.dashFree = t, a.AllowDash || lead
	if t.Tree == nil || len(t.Tree.Root.Nodes) == 0 {
		e.isLiteral = true
	} else if tn, ok := t.Tree.Root.Nodes[0].(*parse.TextNode); ok && len(t.Tree.Root.Nodes) == 1 {
		e.isLiteral, e.literal = true, string(tn.Text)
	}
	return e, nil
}

// parseTemplate compiles one element. lead reports that the element starts
// with literal text, so a parameter cannot put a "-" in front.
func parseTemplate(text string) (t *template.Template, lead bool, err error) {
	t, err = template.New("arg").Option("missingkey=error").Funcs(template.FuncMap{"json": toJSON}).Parse(text)
	if err != nil {
		return nil, false, err
	}
	tn, ok := firstNode(t).(*parse.TextNode)
	return t, ok && len(tn.Text) > 0, nil
}

func firstNode(t *template.Template) parse.Node {
	if t.Tree == nil || len(t.Tree.Root.Nodes) == 0 {
		return nil
	}
	return t.Tree.Root.Nodes[0]
}

func toJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// render expands the template with the call's parameters into argv. Every
// failure is the caller's: a *tools.Error.
func (a *argv) render(params map[string]any) ([]string, error) {
	out := []string{a.program}
	endOfOptions := false
	for _, e := range a.elems {
		if e.when != "" && !present(params[e.when]) {
			continue
		}
		var words []string
		if e.splice != "" {
			var err error
			if words, err = e.renderSplice(params); err != nil {
				return nil, err
			}
		} else if e.isLiteral {
			words = []string{e.literal}
		} else {
			w, err := execute(e.tmpl, params)
			if err != nil {
				return nil, err
			}
			words = []string{w}
		}
		for _, w := range words {
			if !e.dashFree && !endOfOptions && strings.HasPrefix(w, "-") {
				return nil, tools.NewSecurityError("argument %q starts with \"-\" and would be read as an option", w).
					WithCode(tools.CodeOptionInjection).WithSuggestion("pass names that do not start with \"-\" (write ./-name for a file called -name)")
			}
		}
		if e.isLiteral && e.literal == "--" {
			endOfOptions = true
		}
		out = append(out, words...)
	}
	return out, nil
}

func (e argElem) renderSplice(params map[string]any) ([]string, error) {
	v, ok := params[e.splice]
	if !ok || v == nil {
		return nil, nil
	}
	items, ok := v.([]any)
	if !ok {
		items = []any{v}
	}
	words := make([]string, 0, len(items))
	for i, it := range items {
		if !scalar(it) {
			return nil, tools.Errorf(tools.ValidationError, "%s[%d] must be a string, number or boolean", e.splice, i)
		}
		if e.each == nil {
			words = append(words, fmt.Sprint(it))
			continue
		}
		w, err := execute(e.each, it)
		if err != nil {
			return nil, err
		}
		words = append(words, w)
	}
	return words, nil
}

func execute(t *template.Template, data any) (string, error) {
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return "", tools.Errorf(tools.ValidationError, "the arguments do not fill the command line: %v", err).
			WithSuggestion("give every parameter the command needs")
	}
	return b.String(), nil
}

func scalar(v any) bool {
	switch v.(type) {
	case string, json.Number, bool, float64:
		return true
	}
	return false
}

// present reports whether a parameter counts as given for "when": set, and
// not null, false, "" or [].
func present(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	}
	return true
}

// decodeParams decodes a call's arguments, numbers kept as written, and
// applies the schema's top-level defaults (tools.SchemaDefaults). Nulls
// count as absent, so a null argument takes its default.
func decodeParams(raw json.RawMessage, defaults map[string]any) (map[string]any, error) {
	params := map[string]any{}
	if len(raw) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&params); err != nil {
			return nil, tools.Errorf(tools.ValidationError, "the arguments must be a JSON object: %v", err)
		}
	}
	for k, v := range params {
		if v == nil {
			delete(params, k)
		}
	}
	tools.ApplyDefaults(params, defaults)
	return params, nil
}
