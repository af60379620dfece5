package upstream

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toold/toold/internal/launch"
)

// The upstream servers of these tests are real processes: this test
// binary, started again with TOOLD_UPSTREAM_PEER naming how to behave.
const peerEnv = "TOOLD_UPSTREAM_PEER"

// TestMain runs the sandbox shim when this test binary is one, as toold's
// main does; then, as asked, a peer or the tests.
func TestMain(m *testing.M) {
	launch.Shim()
	if mode := os.Getenv(peerEnv); mode != "" {
		runPeer(mode)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runPeer(mode string) {
	switch mode {
	case "sdk":
		_ = peerServer().Run(context.Background(), &mcp.StdioTransport{})
	case "hang":
		// Reads everything, answers nothing: initialize never returns.
		_, _ = bufio.NewReader(os.Stdin).WriteTo(io.Discard)
	default:
		handwritten(mode)
	}
}

type echoIn struct {
	Message string `json:"message"`
}

type echoOut struct {
	Message string `json:"message"`
	Calls   int64  `json:"calls"`
}

type sizeIn struct {
	Bytes int `json:"bytes"`
}

type msIn struct {
	MS int `json:"ms"`
}

// peerServer is a well-behaved server on the official SDK, with a tool for
// each way a call can go.
func peerServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "peer", Version: "1"}, nil)
	var calls atomic.Int64
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes.", Annotations: readOnly},
		func(ctx context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoOut, error) {
			return nil, echoOut{Message: in.Message, Calls: calls.Add(1)}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "slow", Description: "Sleeps."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in msIn) (*mcp.CallToolResult, any, error) {
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(in.MS) * time.Millisecond):
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "slept"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Dies mid-call."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			os.Stderr.WriteString(crashSays)
			os.Exit(3)
			return nil, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Fails."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "upstream says no: AKIAZ7QVXW5KJ2LPR4MN"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "image", Description: "Returns an image and a link."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "a pixel"},
				&mcp.ImageContent{MIMEType: "image/png", Data: []byte("\x89PNG\r\n")},
				&mcp.ResourceLink{URI: "file:///x.txt", Name: "x.txt", MIMEType: "text/plain"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "big", Description: "Returns a large text."},
		func(_ context.Context, _ *mcp.CallToolRequest, in sizeIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", in.Bytes)}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "progress", Description: "Reports progress."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			if tok := req.Params.GetProgressToken(); tok != nil {
				for i := 1; i <= 3; i++ {
					_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 3,
						Message: fmt.Sprintf("step %d", i)})
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "flip", Description: "Adds a tool."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			mcp.AddTool(s, &mcp.Tool{Name: "added", Description: "Added later."},
				func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "new"}}}, nil, nil
				})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "flipped"}}}, nil, nil
		})
	return s
}

// handwritten is a peer no SDK would be: it answers initialize and
// tools/list, then misbehaves as mode says. It writes JSON-RPC by hand
// because misbehaving is the point.
func handwritten(mode string) {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	reply := func(id json.RawMessage, result string) {
		fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", id, result)
		out.Flush()
	}
	for in.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &m) != nil || m.ID == nil {
			continue
		}
		switch m.Method {
		case "initialize":
			reply(m.ID, `{"protocolVersion":"`+m.Params.ProtocolVersion+`","capabilities":{"tools":{}},"serverInfo":{"name":"`+mode+`","version":"1"}}`)
		case "tools/list":
			reply(m.ID, `{"tools":`+strings.ReplaceAll(peerTools[mode], "REF_URL", os.Getenv("TOOLD_PEER_REF_URL"))+`}`)
		case "tools/call":
			switch mode {
			case "garbage":
				fmt.Fprint(out, "this is not JSON-RPC at all\n")
				out.Flush()
			case "utf8":
				fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"bad \xff\xfe bytes"}]}}`+"\n", m.ID)
				out.Flush()
			default:
				reply(m.ID, `{"content":[{"type":"text","text":"ok"}]}`)
			}
		default:
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no"}}`+"\n", m.ID)
			out.Flush()
		}
	}
}

var obj = `{"type":"object"}`

// peerTools are the handwritten peers' lists.
var peerTools = map[string]string{
	"garbage": `[{"name":"g","inputSchema":` + obj + `}]`,
	"utf8":    `[{"name":"u","inputSchema":` + obj + `}]`,
	"collide": `[{"name":"ok","inputSchema":` + obj + `},{"name":"ok","inputSchema":` + obj + `},` +
		`{"name":"bad name!","inputSchema":` + obj + `},` +
		`{"name":"` + strings.Repeat("l", 70) + `","inputSchema":` + obj + `},` +
		`{"name":"notobj","inputSchema":{"type":"string"}},` +
		`{"name":"ref","inputSchema":{"type":"object","properties":{"x":{"$ref":"REF_URL"}}}}]`,
}
