package consult

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/toold/toold/internal/strictjson"
	"github.com/toold/toold/internal/tools"
)

// path is where a JSON document holds a value: object keys and array
// indexes, written with dots ("choices.0.message.content").
type path []string

func parsePath(s string) (path, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ".")
	for _, p := range parts {
		if p == "" {
			return nil, fmt.Errorf("%q has an empty segment: write keys and indexes separated by single dots", s)
		}
	}
	return parts, nil
}

func (p path) String() string { return strings.Join(p, ".") }

// lookup follows p into v; ok is false when a step is missing.
func (p path) lookup(v any) (any, bool) {
	for _, seg := range p {
		switch x := v.(type) {
		case map[string]any:
			next, ok := x[seg]
			if !ok {
				return nil, false
			}
			v = next
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// reading is what a CLI's stdout says: exactly one of answer (success),
// failed (the CLI reported a failure: status error) and problem (the
// output cannot be read: status invalid_output) is set.
type reading struct {
	answer  string
	failed  string
	problem string
}

// maxJSONDepth bounds the nesting of a CLI's JSON output.
const maxJSONDepth = 64

// readOutput reads a CLI's answer from its stdout: the trimmed text, or,
// for json output, the string at answer after checking errs.
func readOutput(stdout, format string, answer, errs path) reading {
	if format != "json" {
		if a := strings.TrimSpace(stdout); a != "" {
			return reading{answer: a}
		}
		return reading{problem: "the provider printed no answer"}
	}
	doc, err := decodeDoc(stdout)
	if err != nil {
		return reading{problem: err.Error()}
	}
	var r reading
	av, found := answer.lookup(doc)
	if ev, ok := errs.lookup(doc); ok && len(errs) > 0 && truthy(ev) {
		r.failed = errorMessage(ev, av)
		return r
	}
	switch a, isText := av.(string); {
	case !found || av == nil:
		r.problem = fmt.Sprintf("the provider's JSON has no answer at %s", answer)
	case !isText:
		r.problem = fmt.Sprintf("the provider's JSON holds %s at %s, not text", kindOf(av), answer)
	case strings.TrimSpace(a) == "":
		r.problem = fmt.Sprintf("the provider's answer at %s is empty", answer)
	default:
		r.answer = strings.TrimSpace(a)
	}
	return r
}

// decodeDoc parses stdout as one JSON value, or else its last non-empty
// line as one (a CLI that prints a notice before its JSON, or JSON lines
// whose last is the result).
func decodeDoc(stdout string) (any, error) {
	text := strings.TrimSpace(stdout)
	if text == "" {
		return nil, errors.New("the provider printed nothing; JSON was expected")
	}
	doc, err := strictjson.Decode([]byte(text), maxJSONDepth)
	if err == nil {
		return doc, nil
	}
	if i := strings.LastIndexByte(text, '\n'); i >= 0 {
		if doc, lerr := strictjson.Decode([]byte(strings.TrimSpace(text[i+1:])), maxJSONDepth); lerr == nil {
			return doc, nil
		}
	}
	return nil, fmt.Errorf("the provider's output is not the JSON expected: %v (it begins %q)", err, tools.CutUTF8(text, 60))
}

// truthy: what in an error field means "failed".
func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case json.Number:
		f, err := x.Float64()
		return err != nil || f != 0
	case map[string]any:
		return len(x) > 0
	case []any:
		return len(x) > 0
	}
	return true
}

// errorMessage is the failure a CLI reported: its message, or, for a flag
// such as is_error, the answer text that then carries the message.
func errorMessage(ev, answer any) string {
	switch x := ev.(type) {
	case string:
		return bound(x)
	case map[string]any:
		if m, ok := x["message"].(string); ok && m != "" {
			return bound(m)
		}
		b, _ := json.Marshal(x)
		return bound(string(b))
	}
	if a, ok := answer.(string); ok && strings.TrimSpace(a) != "" {
		return bound(a)
	}
	return "the provider reported a failure without a message"
}

func kindOf(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	}
	return "a value"
}

// maxMessage bounds a provider's message in a response's error.
const maxMessage = 2000

// bound trims s to maxMessage bytes at a rune boundary.
func bound(s string) string {
	s = strings.TrimSpace(s)
	if len(s) <= maxMessage {
		return s
	}
	return tools.CutUTF8(s, maxMessage) + "…"
}

// tail is at most n bytes of the end of s, cut at a rune boundary.
func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return "…" + tools.TailUTF8(s, n)
}
