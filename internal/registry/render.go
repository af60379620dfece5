package registry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toold/toold/internal/tools"
)

// Format names a discovery rendering.
type Format string

// The discovery renderings of one registry.
const (
	Native    Format = "native"
	OpenAI    Format = "openai"
	Anthropic Format = "anthropic"
	MCP       Format = "mcp"
	Prompt    Format = "prompt"
)

// Formats lists every rendering.
var Formats = []Format{Native, OpenAI, Anthropic, MCP, Prompt}

// ParseFormat accepts a format name; "" means native.
func ParseFormat(s string) (Format, error) { return parseFormat(s, Formats) }

// parseFormat accepts one of formats; "" means native.
func parseFormat(s string, formats []Format) (Format, error) {
	if s == "" {
		return Native, nil
	}
	if f := Format(s); slices.Contains(formats, f) {
		return f, nil
	}
	names := make([]string, len(formats))
	for i, f := range formats {
		names[i] = string(f)
	}
	return "", fmt.Errorf("unknown format %q; use one of %s", s, strings.Join(names, ", "))
}

// ContentType is the media type of a rendering.
func (f Format) ContentType() string {
	if f == Prompt {
		return "text/markdown; charset=utf-8"
	}
	return "application/json"
}

// Item is a tool as the native listing shows it.
type Item struct {
	Name string `json:"name"`
	// FunctionName is the name function-calling APIs get (see
	// FunctionName), when it is not Name; execute accepts either.
	FunctionName         string          `json:"function_name,omitempty"`
	Description          string          `json:"description"`
	Instructions         string          `json:"instructions,omitempty"`
	Returns              string          `json:"returns,omitempty"`
	Category             string          `json:"category"`
	Parameters           json.RawMessage `json:"parameters"`
	Output               json.RawMessage `json:"output,omitempty"`
	Examples             []exampleItem   `json:"examples,omitempty"`
	RequiresConfirmation bool            `json:"requires_confirmation"`
	// Confirmation says how: token (the host asks its user and repeats
	// the call) or human (the call waits for an approver).
	Confirmation string      `json:"confirmation,omitempty"`
	Containment  string      `json:"containment,omitempty"`
	Title        string      `json:"title,omitempty"`
	Effects      EffectsItem `json:"effects"`
	// Source names the upstream MCP server of a proxied tool.
	Source  string      `json:"source,omitempty"`
	Limits  LimitsItem  `json:"limits"`
	Targets TargetsItem `json:"targets"`
	// Fallback names the tools that answer when this one fails in a way
	// that may pass.
	Fallback []string `json:"fallback,omitempty"`
	// Upstream is the state of the remote service the tool calls, as it is
	// now, for tools that call one.
	Upstream *UpstreamItem `json:"upstream,omitempty"`
}

// EffectsItem is what a call may do to the world (tools.Effects).
type EffectsItem struct {
	ReadOnly    bool `json:"read_only"`
	Destructive bool `json:"destructive"`
	Idempotent  bool `json:"idempotent"`
	OpenWorld   bool `json:"open_world"`
}

// UpstreamItem is a remote service's state: its host and its circuit
// breaker (closed, half_open, open), with how long an open one refuses.
type UpstreamItem struct {
	Host         string `json:"host"`
	Breaker      string `json:"breaker"`
	RetryAfterMS int64  `json:"retry_after_ms,omitempty"`
}

type exampleItem struct {
	Description string          `json:"description,omitempty"`
	Arguments   json.RawMessage `json:"arguments"`
}

// LimitsItem are the enforced limits, in milliseconds and counts.
type LimitsItem struct {
	TimeoutMS   int64 `json:"timeout_ms"`
	QueueWaitMS int64 `json:"queue_wait_ms"`
	MaxInFlight int   `json:"max_in_flight"`
	MaxQueue    int   `json:"max_queue"`
	// WaitTimeoutMS bounds a paused call's wait for a subtask, an answer
	// or an approval.
	WaitTimeoutMS int64 `json:"wait_timeout_ms"`
}

// TargetsItem are the documented latency objectives.
type TargetsItem struct {
	TargetMS int64 `json:"target_ms"`
	MaxMS    int64 `json:"max_ms"`
}

// Item renders the entry for the native listing.
func (e *Entry) Item() Item {
	s, l := e.Spec, e.Spec.Limits
	it := Item{Name: s.Name, Description: s.Description, Instructions: s.Instructions, Returns: s.Returns,
		Category: string(s.Category), Parameters: s.Parameters, Output: s.Output,
		RequiresConfirmation: s.Confirmation.Required(), Confirmation: string(s.Confirmation), Containment: s.Containment, Title: s.Title,
		Effects: EffectsItem(s.Effects), Source: s.Source,
		Limits:  LimitsItem{ms(l.Timeout), ms(l.QueueWait), l.MaxInFlight, l.Queue(), ms(l.WaitTimeout)},
		Targets: TargetsItem{ms(l.Target), ms(l.Max)}}
	if e.fname != s.Name {
		it.FunctionName = e.fname
	}
	for _, ex := range s.Examples {
		it.Examples = append(it.Examples, exampleItem(ex))
	}
	it.Fallback = s.Fallback
	if r, ok := e.Tool.(tools.UpstreamReporter); ok {
		u := r.Upstream()
		it.Upstream = &UpstreamItem{Host: u.Host, Breaker: u.Breaker, RetryAfterMS: ms(u.RetryAfter)}
	}
	return it
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

// Render renders the entries (usually those a caller may use) in format f.
func Render(f Format, entries []*Entry) ([]byte, error) {
	if f == Prompt {
		return renderPrompt(entries), nil
	}
	var v any
	switch f {
	case Native:
		items := make([]Item, 0, len(entries))
		for _, e := range entries {
			items = append(items, e.Item())
		}
		v = map[string]any{"tools": items}
	case OpenAI:
		v = mapEntries(entries, openAIItem)
	case Anthropic:
		v = mapEntries(entries, anthropicItem)
	case MCP:
		v = map[string]any{"tools": mapEntries(entries, mcpItem)}
	default:
		return nil, fmt.Errorf("unknown format %q", f)
	}
	return json.MarshalIndent(v, "", "  ")
}

func mapEntries(entries []*Entry, fn func(*Entry) any) []any {
	out := make([]any, 0, len(entries))
	for _, e := range entries {
		out = append(out, fn(e))
	}
	return out
}

// modelDescription is what function-calling APIs get as the description:
// they have no separate field for when to use a tool, so the instructions
// follow the description.
func (e *Entry) modelDescription() string {
	if e.Spec.Instructions == "" {
		return e.Spec.Description
	}
	return e.Spec.Description + "\n\n" + e.Spec.Instructions
}

// bareSchema drops "$schema" and "$id", which some model APIs refuse; the
// draft stays 2020-12, the default of those APIs.
func bareSchema(raw json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return raw
	}
	_, a := m["$schema"]
	_, b := m["$id"]
	if !a && !b {
		return raw
	}
	delete(m, "$schema")
	delete(m, "$id")
	out, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return out
}

func openAIItem(e *Entry) any {
	return map[string]any{"type": "function", "function": map[string]any{
		"name": e.fname, "description": e.modelDescription(), "parameters": bareSchema(e.Spec.Parameters)}}
}

func anthropicItem(e *Entry) any {
	return map[string]any{"name": e.fname, "description": e.modelDescription(),
		"input_schema": bareSchema(e.Spec.Parameters)}
}

// MCPTool is a tool as MCP's tools/list shows it: the same for
// GET /tools?format=mcp and toold's own MCP server.
type MCPTool struct {
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	// OutputSchema is set only when it describes an object, as MCP
	// requires.
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  MCPAnnotations  `json:"annotations"`
	// Execution says how a host may call the tool (MCP 2025-11-25): set
	// for the tools that may wait for a person or a question, which a
	// host may call as a task and follow.
	Execution *MCPExecution `json:"execution,omitempty"`
}

// MCPExecution is a tool's execution hints: whether a host may call it as
// a task ("optional"), must ("required") or may not ("forbidden", the
// default when absent).
type MCPExecution struct {
	TaskSupport string `json:"taskSupport"`
}

// MCPAnnotations are MCP's tool annotations, derived from the tool's
// Effects: hints for hosts deciding what to ask their user, never trusted
// for security.
type MCPAnnotations struct {
	ReadOnlyHint bool `json:"readOnlyHint"`
	// DestructiveHint is meaningful only when the tool is not read-only.
	DestructiveHint *bool `json:"destructiveHint,omitempty"`
	IdempotentHint  bool  `json:"idempotentHint"`
	OpenWorldHint   bool  `json:"openWorldHint"`
}

// MCP renders the entry as an MCP tool, named by its function name (the
// hosts MCP serves refuse a dot in a name, as the model APIs do; see
// FunctionName). A tool that needs confirmation is destructive whatever
// else it says.
func (e *Entry) MCP() MCPTool {
	s := e.Spec
	t := MCPTool{Name: e.fname, Title: s.Title, Description: e.modelDescription(), InputSchema: s.Parameters,
		Annotations: MCPAnnotations{ReadOnlyHint: s.Effects.ReadOnly, IdempotentHint: s.Effects.Idempotent,
			OpenWorldHint: s.Effects.OpenWorld}}
	if !s.Effects.ReadOnly {
		d := s.Effects.Destructive || s.Confirmation.Required()
		t.Annotations.DestructiveHint = &d
	}
	if e.ObjectOutput() {
		t.OutputSchema = s.Output
	}
	if s.Confirmation == tools.ConfirmHuman || s.Pauses {
		t.Execution = &MCPExecution{TaskSupport: "optional"}
	}
	return t
}

// ObjectOutput reports whether the tool declares an object result, which
// MCP serves as the tool's outputSchema (MCP allows only objects there).
func (e *Entry) ObjectOutput() bool {
	if e.output == nil {
		return false
	}
	ts := e.output.Compiled().Types
	return ts != nil && ts.ToStrings()[0] == "object"
}

func mcpItem(e *Entry) any { return e.MCP() }

// renderPrompt writes a model-facing instruction block per tool.
func renderPrompt(entries []*Entry) []byte {
	var b bytes.Buffer
	b.WriteString("# Tools\n\nCall a tool with a JSON object of its parameters.\n")
	for _, e := range entries {
		s := e.Spec
		fmt.Fprintf(&b, "\n## Tool: `%s`\n\n", s.Name)
		fmt.Fprintf(&b, "- **Description:** %s\n", oneLine(s.Description))
		if s.Instructions != "" {
			fmt.Fprintf(&b, "- **When to use:** %s\n", oneLine(s.Instructions))
		}
		b.WriteString("- **Parameters:**")
		params := paramLines(e.params.Compiled(), propertyOrder(s.Parameters))
		if len(params) == 0 {
			b.WriteString(" none\n")
		} else {
			b.WriteString("\n")
			for _, p := range params {
				b.WriteString("  - " + p + "\n")
			}
		}
		fmt.Fprintf(&b, "- **Expected output:** %s\n", oneLine(e.returns()))
		switch s.Confirmation {
		case tools.ConfirmHuman:
			b.WriteString("- **Requires approval:** each call waits until a person approves it.\n")
		case tools.ConfirmToken:
			b.WriteString("- **Requires confirmation:** the user must confirm each call.\n")
		}
		fmt.Fprintf(&b, "- **Example call:** `%s` with `%s`\n", s.Name, compact(e.example))
	}
	return b.Bytes()
}

func (e *Entry) returns() string {
	if e.Spec.Returns != "" {
		return e.Spec.Returns
	}
	if e.output == nil || len(e.output.Compiled().Properties) == 0 {
		return "a JSON value."
	}
	return "a JSON object with " + strings.Join(ordered(e.output.Compiled().Properties, propertyOrder(e.Spec.Output)), ", ") + "."
}

// paramLines lists the parameters, required ones first, each group in the
// order the schema declares them.
func paramLines(s *jsonschema.Schema, order []string) []string {
	names := ordered(s.Properties, order)
	slices.SortStableFunc(names, func(a, b string) int {
		ra, rb := slices.Contains(s.Required, a), slices.Contains(s.Required, b)
		switch {
		case ra && !rb:
			return -1
		case rb && !ra:
			return 1
		}
		return 0
	})
	var lines []string
	for _, name := range names {
		p := s.Properties[name]
		req := "optional"
		if slices.Contains(s.Required, name) {
			req = "required"
		}
		line := fmt.Sprintf("`%s` (%s, %s", name, typeName(p), req)
		if p.Default != nil {
			d, _ := json.Marshal(*p.Default)
			line += ", default: " + string(d)
		}
		if p.Enum != nil {
			vals, _ := json.Marshal(p.Enum.Values)
			line += ", one of: " + string(vals)
		}
		line += ")"
		if p.Description != "" {
			line += ": " + oneLine(p.Description)
		}
		lines = append(lines, line)
	}
	return lines
}

func typeName(s *jsonschema.Schema) string {
	if s.Ref != nil {
		return typeName(s.Ref)
	}
	ts := typesOf(s)
	if len(ts) == 0 || len(ts) >= len(anyType) {
		return "any"
	}
	if ts[0] == "array" {
		if it, ok := s.Items.(*jsonschema.Schema); ok {
			return "array of " + typeName(it)
		}
		if s.Items2020 != nil {
			return "array of " + typeName(s.Items2020)
		}
	}
	return strings.Join(ts, " or ")
}

// typesOf is the types a schema allows: its type, or, for a union written
// portably (anyOf of one type each, see portable.go), the branches' types.
func typesOf(s *jsonschema.Schema) []string {
	if s.Types != nil && !s.Types.IsEmpty() {
		return s.Types.ToStrings()
	}
	var ts []string
	for _, b := range s.AnyOf {
		if b.Types == nil || len(b.Types.ToStrings()) != 1 {
			return nil
		}
		ts = append(ts, b.Types.ToStrings()[0])
	}
	return ts
}

// ordered returns the keys of m in the given order, then any others sorted.
func ordered[V any](m map[string]V, order []string) []string {
	keys := make([]string, 0, len(m))
	for _, k := range order {
		if _, ok := m[k]; ok && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	var rest []string
	for k := range m {
		if !slices.Contains(keys, k) {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	return append(keys, rest...)
}

// propertyOrder reads the top-level "properties" keys of a raw schema in the
// order they are written (the compiled schema keeps them in a map).
func propertyOrder(raw json.RawMessage) []string {
	dec := jsontext.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil
	}
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil
		}
		if tok.String() != "properties" {
			if dec.SkipValue() != nil {
				return nil
			}
			continue
		}
		if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
			return nil
		}
		var keys []string
		for dec.PeekKind() == '"' {
			k, err := dec.ReadToken()
			if err != nil {
				return keys
			}
			keys = append(keys, k.String())
			if dec.SkipValue() != nil {
				return keys
			}
		}
		return keys
	}
	return nil
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}
