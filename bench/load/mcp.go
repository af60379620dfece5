package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpHeaders are what Streamable HTTP requires of a request.
var mcpHeaders = []string{"Accept: application/json, text/event-stream", "MCP-Protocol-Version: 2025-06-18"}

// mcpCall is a tools/call of echo with the REST scenario's arguments.
func mcpCall(tool string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + string(echoBody) + `}}`)
}

func mcpOK(r reply) bool {
	return r.status == 200 && bytes.Contains(r.body, []byte(`"structuredContent"`)) && !bytes.Contains(r.body, []byte(`"isError":true`))
}

// mcpThroughput compares, in one run, toold's echo over REST, the same
// tool over toold's /mcp, and echo on a bare go-sdk stateless server (no
// pipeline).
func mcpThroughput(o options, tooldAddr, bareMCPAddr string) error {
	total, err := compare(o, "MCP throughput", []target{
		{"toold REST POST /tools/echo/execute", tooldAddr, request(tooldAddr, "/tools/echo/execute", echoBody), restOK},
		{"toold MCP tools/call echo", tooldAddr, requestWith("POST", tooldAddr, "/mcp", mcpCall("echo"), mcpHeaders...), mcpOK},
		{"bare go-sdk stateless server", bareMCPAddr, requestWith("POST", bareMCPAddr, "/mcp", mcpCall("echo"), mcpHeaders...), mcpOK},
	})
	if err != nil {
		return err
	}
	fmt.Printf("\ntoold MCP / toold REST: %.0f%% (target >= 85%%); toold MCP p99 %v (target < 10ms); "+
		"toold MCP / bare go-sdk: %.0f%% (aim > 50%%)\n", 100*total[1].rate()/total[0].rate(),
		pct(total[1].lat, .99).Round(time.Microsecond), 100*total[1].rate()/total[2].rate())
	return nil
}

// echoIn and echoOut are the echo tool's shape, for the bare servers.
type echoIn struct {
	Message string         `json:"message"`
	Data    map[string]any `json:"data,omitempty"`
}

type echoOut struct {
	Message string         `json:"message"`
	Data    map[string]any `json:"data,omitempty"`
	Length  int            `json:"length"`
}

func bareMCPServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoOut, error) {
			return nil, echoOut{Message: in.Message, Data: in.Data, Length: len(in.Message)}, nil
		})
	return s
}

// serveBareMCP is the MCP baseline: the same echo on the go-sdk's own
// stateless Streamable HTTP handler, nothing else.
func serveBareMCP() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("baremcp listening on http://%s\n", ln.Addr())
	srv := bareMCPServer()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	log.Fatal((&http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}).Serve(ln))
}

// serveMCPStdio is the upstream of the hosting scenario: echo on stdio.
func serveMCPStdio() {
	if err := bareMCPServer().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}

func startBareMCP(pinned bool) (*server, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	s, addrs, err := start(command(pinned, self, "-role", "baremcp"), "baremcp")
	if err != nil {
		return nil, err
	}
	s.addr = addrs["baremcp"]
	return s, nil
}

// hosting measures what toold adds to a call of an upstream stdio server:
// the same echo called directly by a go-sdk client, and through toold
// (REST and /mcp), one call at a time, in alternating blocks.
func hosting(bin, dir string, pinned bool) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	td, err := startToold(bin, dir, "hosting", fmt.Sprintf(`
commands: {run_as: {uid: 0, gid: 0}}
mcp:
  servers:
    - name: up
      command: %s
      args: [-role, mcpstdio]
      sandbox: {containment: none}
`, self), pinned)
	if err != nil {
		return err
	}
	defer td.stop()

	ctx := context.Background()
	direct, err := mcp.NewClient(&mcp.Implementation{Name: "load", Version: "1"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: command(pinned, self, "-role", "mcpstdio")}, nil)
	if err != nil {
		return fmt.Errorf("the direct upstream: %w", err)
	}
	defer direct.Close()
	var args map[string]any
	_ = json.Unmarshal(echoBody, &args)
	restReq := request(td.addr, "/tools/up.echo/execute", echoBody)
	mcpReq := requestWith("POST", td.addr, "/mcp", mcpCall("up.echo"), mcpHeaders...)
	// Each block dials its own connection just before it starts: an idle
	// new connection is closed at toold's read_header_timeout.
	var c *conn
	ways := []struct {
		name string
		http bool
		call func() error
	}{
		{"go-sdk client -> upstream (direct)", false, func() error {
			res, err := direct.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: args})
			if err == nil && res.IsError {
				err = fmt.Errorf("isError")
			}
			return err
		}},
		{"REST -> toold -> upstream", true, func() error { return check(c.do(restReq, time.Now().Add(10*time.Second))) }},
		{"MCP -> toold -> upstream", true, func() error {
			rep, err := c.do(mcpReq, time.Now().Add(10*time.Second))
			if err == nil && !mcpOK(rep) {
				err = fmt.Errorf("bad answer %d %.200s", rep.status, rep.body)
			}
			return err
		}},
	}
	const block, blocks = 500, 4
	lat := make([][]time.Duration, len(ways))
	for b := range blocks + 1 {
		for i, w := range ways {
			if w.http {
				if c, err = dial(td.addr); err != nil {
					return err
				}
			}
			for range block {
				t0 := time.Now()
				if err := w.call(); err != nil {
					return fmt.Errorf("%s: %w", w.name, err)
				}
				if b > 0 { // the first block warms up
					lat[i] = append(lat[i], time.Since(t0))
				}
			}
			if w.http {
				c.close()
			}
		}
	}
	fmt.Printf("\n## Hosting: an upstream stdio MCP server's echo, one call at a time, %d calls each\n\n", block*blocks)
	fmt.Println("| path | p50 | p99 |")
	fmt.Println("|---|---|---|")
	for i, w := range ways {
		fmt.Printf("| %s | %v | %v |\n", w.name, pct(lat[i], .5).Round(time.Microsecond), pct(lat[i], .99).Round(time.Microsecond))
	}
	added := pct(lat[1], .5) - pct(lat[0], .5)
	fmt.Printf("\ntoold adds %v at p50 over REST, %v over MCP (target <= 0.5ms)\n", added.Round(time.Microsecond),
		(pct(lat[2], .5) - pct(lat[0], .5)).Round(time.Microsecond))
	return nil
}

func check(rep reply, err error) error {
	if err == nil && !restOK(rep) {
		err = fmt.Errorf("bad answer %d %.200s", rep.status, rep.body)
	}
	return err
}
