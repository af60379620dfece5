// Package await holds the tools that wait instead of answering at once, on
// the pause contract of package tools: request_user_input asks a person (the
// unified tool interface pattern's requestUserInput), and delegate hands a
// subtask to the caller's task system (a CONTINUATION with a
// subtask_request), whose result comes back as the tool's answer. While
// they wait, the execution is a record in the state store: no slot, no
// goroutine.
package await

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"

	"github.com/toold/toold/internal/tools"
)

// DefaultMaxDepth bounds how deep delegate calls nest.
const DefaultMaxDepth = 4

// Options configure the tools.
type Options struct {
	// MaxDepth bounds delegate's nesting (default DefaultMaxDepth).
	MaxDepth int
}

// Tools returns request_user_input and delegate.
func Tools(o Options) []tools.Tool {
	if o.MaxDepth <= 0 {
		o.MaxDepth = DefaultMaxDepth
	}
	return []tools.Tool{RequestUserInput(), Delegate(o.MaxDepth)}
}

// InputIn is request_user_input's arguments.
type InputIn struct {
	Prompt  string          `json:"prompt" desc:"The question to show the person, complete enough to answer without other context." validate:"min=1,max=4000"`
	Choices []string        `json:"choices,omitempty" desc:"When set, the answer must be one of these strings." validate:"max=20,dive,min=1,max=200"`
	Schema  json.RawMessage `json:"schema,omitempty" desc:"A JSON Schema (2020-12) the answer must fit, for a structured answer."`
}

// InputOut is request_user_input's answer.
type InputOut struct {
	Answer json.RawMessage `json:"answer" desc:"What the person answered: a string, or a value fitting the schema."`
}

// RequestUserInput asks a person a question and answers with their answer.
func RequestUserInput() tools.Tool {
	return tools.Typed(tools.Spec{
		Name:     "request_user_input",
		Title:    "Ask the user",
		Category: tools.Direct,
		Pauses:   true,
		Description: "Ask the user a question and wait for the answer, when the task cannot go on without " +
			"information or a decision only they have.",
		Instructions: "Use it sparingly: for a missing fact, a choice between options you cannot make, or a " +
			"confirmation the task needs. Ask one clear question; give choices when the answer is one of a few " +
			"options. The call answers later, with what the user said.",
		Effects:  tools.Effects{ReadOnly: true},
		Examples: []tools.Example{{Description: "a choice", Arguments: []byte(`{"prompt":"Which branch should I deploy?","choices":["main","release"]}`)}},
	}, func(ctx context.Context, call *tools.Call, in InputIn) (InputOut, error) {
		if answer, ok, err := tools.Resumed[json.RawMessage](call); ok {
			return InputOut{Answer: answer}, err
		}
		if len(in.Schema) > 0 {
			// The answer is held to it when it comes; a schema that cannot
			// hold anything is the caller's mistake, told now.
			if _, err := tools.CompileSchema("request_user_input", "answer", in.Schema); err != nil {
				e := tools.Errorf(tools.ValidationError, "the schema cannot check an answer: %v", err).
					WithSuggestion("give a JSON Schema (draft 2020-12) without remote references, or leave schema out for a text answer")
				e.Fields = []tools.FieldError{{Pointer: "/schema", Message: err.Error()}}
				return InputOut{}, e
			}
		}
		return InputOut{}, &tools.Pause{Input: &tools.InputRequest{Prompt: in.Prompt, Choices: in.Choices, Schema: in.Schema}}
	})
}

// DelegateIn is delegate's arguments: the pattern's subtask_request, and
// the parent delegate call when this subtask is part of another.
type DelegateIn struct {
	Type          string          `json:"type,omitempty" desc:"The kind of subtask (atomic, sequential, ...)." default:"atomic" validate:"max=64"`
	Description   string          `json:"description" desc:"What the subtask must do, for whoever performs it." validate:"min=1,max=8000"`
	Inputs        json.RawMessage `json:"inputs,omitempty" desc:"The data the subtask works on (a JSON object)."`
	TemplateHints []string        `json:"template_hints,omitempty" desc:"Hints for choosing how to perform it (data_analysis, ...)." validate:"max=20,dive,min=1,max=100"`
	Parent        string          `json:"parent,omitempty" desc:"The execution id of the delegate call this subtask is part of, when performing a subtask delegates again." validate:"omitempty,len=24,hexadecimal"`
}

// DelegateOut is delegate's answer: the subtask's result.
type DelegateOut struct {
	Result json.RawMessage `json:"result" desc:"The subtask's result, as the task system gave it."`
	Depth  int             `json:"depth" desc:"How deep this subtask was nested (1: not inside another)."`
}

// delegateState is what delegate keeps while it waits.
type delegateState struct {
	Depth int `json:"depth"`
}

// Delegate hands a subtask to the caller's task system and answers with its
// result. Subtasks nest through parent, at most maxDepth deep, and a
// subtask identical to one above it (a cycle) is refused.
func Delegate(maxDepth int) tools.Tool {
	return tools.Typed(tools.Spec{
		Name:     "delegate",
		Title:    "Delegate a subtask",
		Category: tools.Subtask,
		Pauses:   true,
		Description: "Hand a self-contained subtask to the task system (often a separate model call) and get " +
			"its result back as this tool's answer.",
		Instructions: "Use it for work that needs its own reasoning — analysing data, reviewing a change, " +
			"drafting a section — described completely in description, with its data in inputs. When you are " +
			"performing a subtask and delegate again, pass the parent execution id you were given.",
		Effects:  tools.Effects{ReadOnly: true},
		Examples: []tools.Example{{Description: "an analysis", Arguments: []byte(`{"description":"Summarise the failing tests and their likely cause","inputs":{"log":"..."},"template_hints":["debugging"]}`)}},
	}, func(ctx context.Context, call *tools.Call, in DelegateIn) (DelegateOut, error) {
		if call.Resume != nil {
			st, err := tools.ResumedState[delegateState](call)
			return DelegateOut{Result: call.Resume.Answer, Depth: st.Depth}, err
		}
		lineage := &tools.Lineage{}
		if in.Parent != "" {
			if call.Lineage == nil {
				return DelegateOut{}, tools.NewUserError("nested subtasks need the state store, which is off").WithCode(tools.CodeNoStore)
			}
			parent, err := call.Lineage(ctx, in.Parent)
			if err != nil {
				return DelegateOut{}, err
			}
			lineage.Depth, lineage.Fingerprints = parent.Depth, parent.Fingerprints
		}
		if lineage.Depth+1 > maxDepth {
			return DelegateOut{}, tools.NewUserError("subtasks may nest %d deep; this one would be %d deep", maxDepth, lineage.Depth+1).
				WithCode(tools.CodeTooDeep).WithSuggestion("perform this subtask yourself instead of delegating it again")
		}
		fp := fingerprint(in)
		if slices.Contains(lineage.Fingerprints, fp) {
			return DelegateOut{}, tools.NewUserError("this subtask is the same as one it is part of: delegating it would loop").
				WithCode(tools.CodeCycle).WithSuggestion("perform it yourself, or delegate a smaller part of it")
		}
		lineage.Depth++
		lineage.Fingerprints = append(slices.Clone(lineage.Fingerprints), fp)
		st, _ := json.Marshal(delegateState{Depth: lineage.Depth})
		return DelegateOut{}, &tools.Pause{State: st, Lineage: lineage,
			Subtask: &tools.SubtaskRequest{Type: in.Type, Description: in.Description, Inputs: in.Inputs, TemplateHints: in.TemplateHints}}
	})
}

// fingerprint identifies a subtask by what it asks: type, description and
// inputs (canonical: keys sorted, spacing ignored).
func fingerprint(in DelegateIn) string {
	var inputs any
	_ = json.Unmarshal(in.Inputs, &inputs)
	canonical, _ := json.Marshal([]any{in.Type, in.Description, inputs})
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:12])
}
