package registry

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strconv"
	"strings"
)

// FunctionNamePattern is the rule OpenAI's and Anthropic's APIs hold tool
// names to, and the one MCP hosts hold a server's tools to (Claude Desktop
// and claude.ai refuse a whole server over one name that breaks it; Codex
// and Copilot CLI hand the name to a model API, which refuses it). A toold
// name may also hold dots (a hosted MCP tool is server.tool), which all of
// them refuse: every rendering for them, MCP's included, is FunctionName's.
var FunctionNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// MCPNamePattern is MCP's own rule for tool names (1-128 of letters,
// digits, _ - .), as the go-sdk checks it when a tool is added. It is
// looser than what hosts accept, so toold's MCP names follow
// FunctionNamePattern, which fits inside it.
var MCPNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,128}$`)

// hashLen is how many hex digits of the name's SHA-256 end a hashed
// function name.
const hashLen = 8

// FunctionName is the name a tool is given where function-calling APIs
// and MCP hosts read it (?format=openai, ?format=anthropic, ?format=mcp,
// toold's MCP server, the console); every route accepts it as well as the
// canonical name. It is the one renderer of a tool's outside name. The mapping depends on the name alone, so it is
// the same in every listing and on every replica:
//
//   - a name those APIs accept is its own function name;
//   - else each dot becomes "__" (everything.echo -> everything__echo)
//     when the result fits in 64 characters and the name holds no "__"
//     and no underscore next to a dot: then the mapping can be read back
//     (one "_" was "_", each "__" a dot), so two such names never meet;
//   - else the dots become "_", the name is cut to 55 characters, and "_"
//     and the first 8 hex digits of the SHA-256 of the whole name follow.
//
// A function name that is another tool's name or function name (a command
// tool named everything__echo next to a hosted everything.echo) is
// refused like a duplicate name: the tool registered later is not served.
func FunctionName(name string) string {
	if FunctionNamePattern.MatchString(name) {
		return name
	}
	readable := strings.ReplaceAll(name, ".", "__")
	if len(readable) <= 64 && !strings.Contains(name, "__") && !strings.Contains(name, "_.") &&
		!strings.Contains(name, "._") && FunctionNamePattern.MatchString(readable) {
		return readable
	}
	sum := sha256.Sum256([]byte(name))
	base := strings.Map(func(r rune) rune {
		if r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, name)
	if limit := 64 - 1 - hashLen; len(base) > limit {
		base = base[:limit]
	}
	return base + "_" + hex.EncodeToString(sum[:])[:hashLen]
}

// FunctionName is the tool's name for function-calling APIs.
func (e *Entry) FunctionName() string { return e.fname }

// Canonical returns the canonical name of the tool called name, which may
// be its function name; any other name comes back unchanged (and is then
// unknown to Lookup, which reports it). Transports resolve a name with it
// before they hand a call to the pipeline, so the pipeline, its keys'
// allow-lists, its metrics and its envelopes see one name per tool.
func (r *Registry) Canonical(name string) string {
	if c, ok := r.aliases[name]; ok {
		return c
	}
	return name
}

// nameTaken returns the tool that already answers to e's name or function
// name, or nil.
func (r *Registry) nameTaken(e *Entry) *Entry {
	for _, n := range []string{e.Spec.Name, e.fname} {
		if o := r.byName[n]; o != nil {
			return o
		}
		if c, ok := r.aliases[n]; ok {
			return r.byName[c]
		}
	}
	return nil
}

// LogName is how a requested tool name may appear in a log line, a
// span, an event or an audit record: the canonical name of a tool the
// registry has, or for any other name UnknownName's form. A name no tool
// has is caller input, and may be anything — a token pasted into a path
// included — so it is never written as it came.
func (r *Registry) LogName(name string) string {
	if e, ok := r.Lookup(r.Canonical(name)); ok {
		return e.Spec.Name
	}
	return UnknownName(name)
}

// UnknownName is a name no tool has, redacted and bounded:
// "tool_unknown(len=N,sha256=<16 hex>)", its length and the start of its
// SHA-256, so repeated probes can be told apart, and a name someone
// already knows can be matched, without the name itself being kept.
func UnknownName(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "tool_unknown(len=" + strconv.Itoa(len(name)) + ",sha256=" + hex.EncodeToString(sum[:8]) + ")"
}
