// Command peers is the load harness's bare mcp-go peer: the echo tool on
// mcp-go's stateless Streamable HTTP server and nothing else. It lives in a
// module of its own so that toold's module does not depend on mcp-go; the
// harness builds it with `go build` and runs it pinned like its other
// servers.
package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

func main() {
	s := server.NewMCPServer("bare-mcp-go", "1", server.WithToolCapabilities(false))
	tool := mcp.NewTool("echo", mcp.WithDescription("Echoes."),
		mcp.WithString("message", mcp.Required()),
		mcp.WithObject("data"))
	s.AddTool(tool, func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args := req.GetArguments()
		msg, _ := args["message"].(string)
		out := map[string]any{"message": msg, "length": len(msg)}
		if d, ok := args["data"].(map[string]any); ok {
			out["data"] = d
		}
		return mcp.NewToolResultStructured(out, msg), nil
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("mcpgo listening on http://%s\n", ln.Addr())
	h := server.NewStreamableHTTPServer(s, server.WithStateLess(true))
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	log.Fatal((&http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}).Serve(ln))
}
