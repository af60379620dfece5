package dispatch

import (
	"strings"
	"testing"

	"github.com/toold/toold/internal/tools"
)

// TestRedact: every echo field of a failure is redacted, twice changes
// nothing more, the tool's own error (shared) is left as it was, and a
// success and a confirmation token are not touched.
func TestRedact(t *testing.T) {
	d := newDispatcher(t, nil, noop{})
	tok := "ghp_Zq8XcV2bN4mL6kJ9hG3fD5sA7pO1iU0yTr2w"
	te := tools.Errorf(tools.ValidationError, "no tool %q", tok).WithSuggestion("not %s", tok)
	te.Fields = []tools.FieldError{{Pointer: "/" + tok, Message: "unknown " + tok}}
	env := Failure(tok, tok, StatusRejected, te)
	env.Error.ConfirmToken = "confirm-token-kept"
	env.FallbackFrom = []FallbackStep{{Tool: tok, Error: &ErrorBody{Message: tok}}}
	d.Redact(env)
	once := string(env.AppendJSON(nil))
	d.Redact(env)
	if twice := string(env.AppendJSON(nil)); twice != once {
		t.Errorf("redacting twice changed the envelope:\n%s\n%s", once, twice)
	}
	if strings.Contains(once, tok[4:]) || !strings.Contains(once, "confirm-token-kept") {
		t.Errorf("redacted: %s", once)
	}
	if te.Fields[0].Pointer != "/"+tok {
		t.Errorf("the tool's error was changed in place: %+v", te.Fields)
	}
	ok := &Envelope{RequestID: tok, Tool: "noop", Status: StatusSuccess, Success: true}
	d.Redact(ok)
	if ok.RequestID != tok {
		t.Error("a success was redacted")
	}
}
