package command

import (
	"errors"
	"os"
	"testing"

	"github.com/toold/toold/internal/launch"
	"github.com/toold/toold/internal/tools"
)

// TestToolError: each way a start fails is answered as the tool error a
// model or the operator can act on, with the code and suggestion the
// envelope carries; other errors (the call's deadline) pass as they are.
func TestToolError(t *testing.T) {
	cases := []struct {
		kind       launch.ErrorKind
		want       tools.Kind
		code       string
		suggestion bool
	}{
		{launch.NotFound, tools.UserError, "", true},
		{launch.Permission, tools.PermissionError, "", true},
		{launch.Closed, tools.OverloadError, "", true},
		{launch.Retired, tools.SystemError, "sandbox_failed", true},
		{launch.Outside, tools.SecurityError, "outside_workspace", false},
		{launch.NoDirectory, tools.UserError, "", false},
	}
	for _, c := range cases {
		le := &launch.Error{Kind: c.kind, Msg: "what happened", Err: os.ErrNotExist}
		te, ok := tools.AsError(toolError("/bin/x", le))
		if !ok || te.Kind != c.want || string(te.Code) != c.code || (te.Suggestion != "") != c.suggestion {
			t.Errorf("kind %d: %+v, want %s with code %q (suggestion %v)", c.kind, te, c.want, c.code, c.suggestion)
		}
		if !errors.Is(te, os.ErrNotExist) {
			t.Errorf("kind %d: the cause is not wrapped", c.kind)
		}
	}
	other := errors.New("command x stopped: context deadline exceeded")
	if got := toolError("/bin/x", other); got != other {
		t.Errorf("an error of no launch kind became %v", got)
	}
}
