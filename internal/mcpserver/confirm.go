package mcpserver

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/tools"
)

// confirmInput names the one input request of a confirmation.
const confirmInput = "confirm"

// multiRoundTrip is the first protocol version with multi-round-trip
// requests (input_required results the client fulfils and retries).
const multiRoundTrip = "2026-07-28"

// confirmSchema is the form the host shows its user.
var confirmSchema = json.RawMessage(`{"type":"object","properties":{"confirm":{"type":"boolean",` +
	`"title":"Run it","description":"Let the tool run with these arguments."}},"required":["confirm"]}`)

// confirmation is what a call says about a confirmation toold asked for.
type confirmation struct {
	token    string
	declined bool
}

// confirmationOf reads the confirmation a call carries: a multi-round-trip
// retry (the request state is toold's token, the input response the user's
// answer), or the token an older host repeats in the call's _meta. The token
// is the pipeline's HMAC bound to caller, tool and arguments: the pipeline,
// not this transport, decides whether it is good.
func confirmationOf(req *mcp.CallToolRequest) confirmation {
	p := req.Params
	if token, ok := strings.CutPrefix(p.RequestState, stateConfirm); ok {
		ans, ok := p.InputResponses[confirmInput].(*mcp.ElicitResult)
		if !ok || ans.Action != "accept" || ans.Content["confirm"] != true {
			return confirmation{declined: true}
		}
		return confirmation{token: token}
	}
	if t, ok := p.Meta[MetaConfirmToken].(string); ok {
		return confirmation{token: t}
	}
	return confirmation{}
}

// confirmationResult asks for confirmation the way the client understands:
// a 2026-07-28 client that can elicit gets an input_required result, so its
// host asks the user and retries with the answer; any other client gets
// isError with confirmation_required and the token in the result's _meta,
// to repeat the call with the token in the call's _meta once its user
// agreed.
func confirmationResult(req *mcp.CallToolRequest, env *dispatch.Envelope, hasOutputSchema bool) *mcp.CallToolResult {
	if canElicit(req) {
		return &mcp.CallToolResult{
			InputRequests: mcp.InputRequestMap{confirmInput: &mcp.ElicitParams{Mode: "form", RequestedSchema: confirmSchema,
				Message: "Run the tool " + env.Tool + "? " + env.Error.Message}},
			RequestState: stateConfirm + env.Error.ConfirmToken,
		}
	}
	e := *env.Error
	e.Suggestion = confirmOutside(env.Tool, &e)
	cp := *env
	cp.Error = &e
	res := render(&cp, hasOutputSchema)
	res.Meta[MetaConfirmToken] = e.ConfirmToken
	res.Meta[MetaConfirmExpires] = e.ConfirmExpiresAt
	return res
}

// confirmOutside says what confirms a call when the client cannot ask its
// user over MCP: /mcp reads a token in the call's _meta, never a header
// (the pipeline's own suggestion names REST's Toold-Confirm).
func confirmOutside(tool string, e *dispatch.ErrorBody) string {
	left := time.Until(confirmExpiry(e)).Round(time.Second)
	return fmt.Sprintf("this MCP client cannot ask its user (it declares no elicitation), so the confirmation happens outside the call: "+
		"a host repeats this exact call with \"_meta\": {%q: %q} in its params once its user agreed, or a person runs it with "+
		"POST /tools/%s/execute, the same arguments and the header Toold-Confirm: %s, within %v. Repeating the call unchanged only asks again.",
		MetaConfirmToken, e.ConfirmToken, tool, e.ConfirmToken, left)
}

// roundTrips is what a client can be asked in a multi-round-trip request:
// its capabilities when it speaks 2026-07-28 or later, else nil.
func roundTrips(req *mcp.CallToolRequest) *mcp.ClientCapabilities {
	if req.Session == nil {
		return nil
	}
	if ip := req.Session.InitializeParams(); ip != nil && ip.ProtocolVersion >= multiRoundTrip {
		return ip.Capabilities
	}
	return nil
}

func canElicit(req *mcp.CallToolRequest) bool {
	caps := roundTrips(req)
	return caps != nil && caps.Elicitation != nil
}

// declined answers a call whose user said no.
func declined(tool string) *mcp.CallToolResult {
	env := dispatch.Failure("", tool, dispatch.StatusRejected, permissionDeclined())
	return render(env, true)
}

func permissionDeclined() *tools.Error {
	return tools.NewPermissionError("the user declined to run the tool").WithCode(tools.CodeDeclined).
		WithSuggestion("do not repeat the call unless the user asks for it")
}

// confirmExpiry is when a confirmation token expires (now when it says
// nothing readable).
func confirmExpiry(e *dispatch.ErrorBody) time.Time {
	t, err := time.Parse(time.RFC3339Nano, e.ConfirmExpiresAt)
	if err != nil {
		return time.Now()
	}
	return t
}
