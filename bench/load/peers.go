package main

import (
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

// peers is issue 17's comparison: in one run, the same generator
// alternating between toold (REST execute and /mcp tools/call of its echo
// tool) and the servers it is measured against, each serving the same
// echo as cheaply as it can:
//
//   - bare net/http: decode the JSON body, encode it back;
//   - bare go-sdk, stateless, the version toold uses, with a typed tool
//     (the SDK infers the schemas and validates input and output);
//   - bare go-sdk, stateless, with a low-level tool (no schema
//     validation, as toold's own tools are registered);
//   - bare mcp-go, stateless (bench/load/peers, a module of its own).
//
// At 16 and 64 connections it prints req/s, p50, p99 and each server's
// CPU per call (its user+system time from /proc over the rounds it was
// measured, divided by the calls), then the ratios issue 17 sets targets
// for.
func peers(o options, dir string, pinned bool, bare, td *server) error {
	typed, err := startRole(pinned, "baremcp")
	if err != nil {
		return err
	}
	defer typed.stop()
	raw, err := startRole(pinned, "baremcpraw")
	if err != nil {
		return err
	}
	defer raw.stop()
	mcpgoBin, err := buildPeers(dir)
	if err != nil {
		return err
	}
	mg, addrs, err := start(command(pinned, mcpgoBin), "mcpgo")
	if err != nil {
		return err
	}
	mg.addr = addrs["mcpgo"]
	defer mg.stop()

	const (
		iBare = iota
		iREST
		iMCP
		iTyped
		iRaw
		iMCPGo
	)
	targets := []target{
		iBare:  {"bare net/http JSON echo", bare.addr, request(bare.addr, "/echo", echoBody), func(r reply) bool { return r.status == 200 }},
		iREST:  {"toold REST POST /tools/echo/execute", td.addr, request(td.addr, "/tools/echo/execute", echoBody), restOK},
		iMCP:   {"toold /mcp tools/call echo", td.addr, requestWith("POST", td.addr, "/mcp", mcpCall("echo"), mcpHeaders...), mcpOK},
		iTyped: {"bare go-sdk stateless, typed tool (validates)", typed.addr, requestWith("POST", typed.addr, "/mcp", mcpCall("echo"), mcpHeaders...), mcpOK},
		iRaw:   {"bare go-sdk stateless, low-level tool", raw.addr, requestWith("POST", raw.addr, "/mcp", mcpCall("echo"), mcpHeaders...), mcpOK},
		iMCPGo: {"bare mcp-go stateless", mg.addr, requestWith("POST", mg.addr, "/mcp", mcpCall("echo"), mcpHeaders...), mcpOK},
	}
	servers := []*server{bare, td, td, typed, raw, mg}
	for _, conns := range []int{16, 64} {
		oc := o
		oc.conns = conns
		cpu, around, cpuCol := serverCPU(servers)
		total, err := compareAround(oc, "Peers: the same echo on toold and on bare servers", targets, around, cpuCol,
			column{"req/s vs bare net/http", func(i int, total []*stats) string {
				return fmt.Sprintf("%.0f%%", 100*total[i].rate()/total[iBare].rate())
			}},
		)
		if err != nil {
			return err
		}
		r := func(a, b int) float64 { return 100 * total[a].rate() / total[b].rate() }
		c := func(a, b int) float64 { // calls per CPU-second, a over b
			return 100 * (float64(total[a].n) / cpu[a].Seconds()) / (float64(total[b].n) / cpu[b].Seconds())
		}
		fmt.Printf("\nat %d connections, req/s (calls per server CPU-second in brackets):\n", conns)
		fmt.Printf("- toold REST / bare net/http: %.0f%% (%.0f%%), target >= 60%%\n", r(iREST, iBare), c(iREST, iBare))
		fmt.Printf("- toold /mcp / toold REST: %.0f%% (%.0f%%), target >= 85%%\n", r(iMCP, iREST), c(iMCP, iREST))
		fmt.Printf("- toold /mcp / bare mcp-go: %.0f%% (%.0f%%), target >= 100%%\n", r(iMCP, iMCPGo), c(iMCP, iMCPGo))
		fmt.Printf("- toold /mcp / bare go-sdk typed: %.0f%% (%.0f%%); / go-sdk low-level: %.0f%% (%.0f%%)\n",
			r(iMCP, iTyped), c(iMCP, iTyped), r(iMCP, iRaw), c(iMCP, iRaw))
		fmt.Printf("- toold /mcp p99: %v, target < 10ms at 64 connections\n", pct(total[iMCP].lat, .99).Round(time.Microsecond))
	}
	return nil
}

// serverCPU measures each target's server CPU across compareAround's
// rounds (servers[i] serves targets[i]): cpu sums it, around is
// compareAround's hook, col the "server CPU per call" column.
func serverCPU(servers []*server) (cpu []time.Duration, around func(i, round int) func(), col column) {
	cpu = make([]time.Duration, len(servers))
	around = func(i, _ int) func() {
		c0 := servers[i].cpu()
		return func() { cpu[i] += servers[i].cpu() - c0 }
	}
	return cpu, around, column{"server CPU per call", func(i int, total []*stats) string { return perCall(cpu[i], total[i].n) }}
}

// perCall is CPU time over calls, "-" without calls.
func perCall(cpu time.Duration, n int) string {
	if n == 0 {
		return "-"
	}
	return (cpu / time.Duration(n)).Round(100 * time.Nanosecond).String()
}

// startRole starts this binary as one of its bare servers.
func startRole(pinned bool, role string) (*server, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	s, addrs, err := start(command(pinned, self, "-role", role), role)
	if err != nil {
		return nil, err
	}
	s.addr = addrs[role]
	return s, nil
}

// buildPeers builds bench/load/peers (the bare mcp-go server), a module of
// its own so that toold's does not require mcp-go.
func buildPeers(dir string) (string, error) {
	return goBuild(dir, "mcpgo", "bench/load/peers", ".")
}

// serveBareMCPRaw is the go-sdk peer without schema validation: echo
// registered with Server.AddTool, decoding its arguments itself, as toold
// registers its tools.
func serveBareMCPRaw() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("baremcpraw listening on http://%s\n", ln.Addr())
	srv := mcp.NewServer(&mcp.Implementation{Name: "bare-raw", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "echo", Description: "Echoes.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in echoIn
			if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
				return nil, err
			}
			out := echoOut{Message: in.Message, Data: in.Data, Length: len(in.Message)}
			b, err := json.Marshal(out)
			if err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: json.RawMessage(b)}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	log.Fatal((&http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}).Serve(ln))
}
