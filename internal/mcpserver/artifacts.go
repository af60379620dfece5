package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/state"
	"github.com/toold/toold/internal/tools"
	"github.com/toold/toold/internal/tracing"
)

// Results over their tool's budget (dispatch's output budget): the
// tools/call result carries the head, and a resource_link to the whole,
// toold://artifacts/{id}, which resources/read returns to the caller who
// made the call (the same key or principal; anyone else is told it does
// not exist). A read takes at most MaxArtifactRead bytes; a larger
// artifact is read in parts with ?offset=&length= (bytes).

// Artifacts reads results kept whole: the state store's (state.Artifacts).
type Artifacts interface {
	ReadRange(ctx context.Context, owner, id string, off, n int64) ([]byte, int64, error)
}

// ArtifactScheme prefixes an artifact's resource URI.
const ArtifactScheme = "toold://artifacts/"

// MaxArtifactRead bounds one resources/read of an artifact (16 MiB).
const MaxArtifactRead = 16 << 20

// artifactTemplate is the resource template every SDK server offers when
// toold keeps artifacts.
var artifactTemplate = mcp.ResourceTemplate{URITemplate: ArtifactScheme + "{id}{?offset,length}", Name: "artifact",
	Title: "A tool result kept whole", MIMEType: "application/json",
	Description: "The whole result of a call whose answer was cut to its tool's budget: the tools/call result links it (resource_link). " +
		"offset and length (bytes) read a part of a large one."}

// CodeOverloaded is the JSON-RPC error code of a request refused for its
// principal's rate (429's digits in the range -32000 to -32099, which is
// the implementation's): its data carries toold's code and when to retry.
// Not -32000 to -32005, which the SDK's JSON-RPC layer reads as its own
// (-32003 and -32004 close the connection), nor MCP's -32002 or -32020s.
const CodeOverloaded = -32029

// overloaded is the JSON-RPC error of a request its principal's bounds
// refused (err a *tools.Error: principal_rate, its retry delay).
func overloaded(err error) *jsonrpc.Error {
	te, ok := tools.AsError(err)
	if !ok {
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the request could not be charged; retry in a moment"}
	}
	data := struct {
		Code         string `json:"code"`
		RetryAfterMS int64  `json:"retry_after_ms,omitempty"`
		Suggestion   string `json:"suggestion,omitempty"`
	}{Code: string(te.Code), RetryAfterMS: te.RetryAfter.Milliseconds(), Suggestion: te.Suggestion}
	raw, _ := json.Marshal(data)
	return &jsonrpc.Error{Code: CodeOverloaded, Message: te.Message, Data: raw}
}

// artifactLink is the resource_link of a's whole result.
func artifactLink(a *dispatch.Artifact, head int) *mcp.ResourceLink {
	size := a.Bytes
	return &mcp.ResourceLink{URI: ArtifactScheme + a.ID, Name: a.ID, Title: "The whole result", MIMEType: "application/json", Size: &size,
		Description: fmt.Sprintf("The result was %d bytes, over the tool's budget: the text above is its first %d bytes. "+
			"resources/read this URI for the whole (until %s; add ?offset=N&length=M for a part).", a.Bytes, head, a.ExpiresAt.Format("2006-01-02T15:04:05Z"))}
}

// readArtifact answers resources/read of an artifact.
func (s *Server) readArtifact(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	p, err := caller(ctx)
	if err != nil {
		return nil, noCaller()
	}
	id, off, n, part, err := parseArtifactURI(uri)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	// Charged its principal's rate (auth.limits.rate) as GET
	// /artifacts/{id} and a search are.
	if err := s.opts.Dispatcher.Charge(p.Name, 1); err != nil {
		return nil, overloaded(err)
	}
	ask := n
	if !part {
		ask++ // the whole was asked for: one byte more says it is too long
	}
	data, size, err := s.opts.Artifacts.ReadRange(ctx, p.Name, id, off, ask)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return nil, mcp.ResourceNotFoundError(uri)
	case err != nil:
		s.log.Warn("mcp: an artifact could not be read", append(tracing.LogFields(ctx), zap.Error(err))...)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the state store could not be read; retry in a moment"}
	case int64(len(data)) > n:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(
			"the artifact is %d bytes, more than one read returns (%d from offset %d): read it in parts with ?offset=N&length=M (at most %d each)",
			size, n, off, MaxArtifactRead)}
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(data)}},
		Meta: mcp.Meta{"toold/artifact": map[string]int64{"bytes": size, "offset": off, "length": int64(len(data))}}}, nil
}

// parseArtifactURI reads toold://artifacts/{id}[?offset=N&length=M]; the
// length is at most MaxArtifactRead (the default). part says a part was
// asked for (either parameter).
func parseArtifactURI(uri string) (id string, off, n int64, part bool, err error) {
	rest, ok := strings.CutPrefix(uri, ArtifactScheme)
	if !ok {
		return "", 0, 0, false, fmt.Errorf("not an artifact's URI: it starts %s", ArtifactScheme)
	}
	id, query, _ := strings.Cut(rest, "?")
	if !dispatch.ValidArtifactID(id) {
		return "", 0, 0, false, errors.New("an artifact's id is art_ and 32 hex digits, as the resource_link gave it")
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", 0, 0, false, fmt.Errorf("the URI's query: %v", err)
	}
	n = MaxArtifactRead
	for key, vs := range q {
		v, err := strconv.ParseInt(vs[0], 10, 64)
		switch {
		case len(vs) != 1 || err != nil || v < 0:
			return "", 0, 0, false, fmt.Errorf("%s must be one whole number of bytes, 0 or more", key)
		case key == "offset":
			off = v
		case key == "length":
			if v == 0 || v > MaxArtifactRead {
				return "", 0, 0, false, fmt.Errorf("length must be 1 to %d bytes", MaxArtifactRead)
			}
			n = v
		default:
			return "", 0, 0, false, fmt.Errorf("unknown parameter %q: only offset and length", key)
		}
	}
	return id, off, n, len(q) > 0, nil
}
