package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toold/toold/internal/registry"
)

// hostName is the rule MCP hosts hold tool names to: Claude Desktop and
// claude.ai refuse a server with one name that breaks it.
var hostName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// mcpVersions are the protocol versions the Go SDK's client is held to:
// the one before the new protocol, and the new one.
var mcpVersions = []string{"2025-11-25", "2026-07-28"}

// goClient connects the Go SDK's client over transport at version.
func goClient(t *testing.T, transport mcp.Transport, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "go-sdk", Version: "1"}, opts).
		Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect at %s: %v", version, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// listedWith lists the session's tools until want is among them (a hosted
// server's tools arrive once it is connected), and returns the names.
func listedWith(t *testing.T, cs *mcp.ClientSession, want string) []string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		lr, err := cs.ListTools(ctx, nil)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range lr.Tools {
			names = append(names, tl.Name)
		}
		if strings.Contains(" "+strings.Join(names, " ")+" ", " "+want+" ") || time.Now().After(deadline) {
			return names
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkHostNames holds a listing to the hosts' rule: every name matches,
// none is listed twice, and the hosted reference servers' tools are there
// under their function names (and never dotted).
func checkHostNames(t *testing.T, who string, names []string, atLeast int) {
	t.Helper()
	seen := map[string]bool{}
	for _, n := range names {
		if !hostName.MatchString(n) || seen[n] {
			t.Errorf("%s: the name %q breaks the hosts' rule or is listed twice", who, n)
		}
		seen[n] = true
	}
	for _, want := range []string{"everything__echo", "everything__get-sum", "files__read_text_file", "read_file"} {
		if !seen[want] {
			t.Errorf("%s lists no %s: %v", who, want, names)
		}
	}
	if len(names) < atLeast {
		t.Errorf("%s lists %d tools: %v", who, len(names), names)
	}
}

// callEcho calls the hosted everything server's echo by the name listed,
// and by its canonical name, an alias.
func callEcho(t *testing.T, who string, cs *mcp.ClientSession) {
	t.Helper()
	for _, name := range []string{"everything__echo", "everything.echo"} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"message": "hi from " + who}})
		cancel()
		if err != nil || res.IsError || !strings.Contains(fmt.Sprint(res.StructuredContent), "hi from "+who) {
			t.Errorf("%s: calling %s: %v %+v", who, name, err, res)
		}
	}
}

// inspector runs the MCP Inspector's CLI (pinned in test/mcp) with args
// and returns its JSON result.
func inspector(t *testing.T, dir string, args ...string) json.RawMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cli := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js")
	cmd := exec.CommandContext(ctx, "node", append([]string{cli, "--cli", "--format", "json", "-q"}, args...)...)
	// Its catalog and secrets go under HOME: the test's, not the user's.
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the Inspector CLI %v: %v\nstdout: %s\nstderr: %s", args, err, stdout.String(), stderr.String())
	}
	var out struct{ Result json.RawMessage }
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || out.Result == nil {
		t.Fatalf("the Inspector CLI's output %q: %v", stdout.String(), err)
	}
	return out.Result
}

// inspectorNames lists the tools through the Inspector CLI; target is a
// URL, or a command and its arguments.
func inspectorNames(t *testing.T, dir string, target ...string) []string {
	t.Helper()
	var list struct{ Tools []struct{ Name string } }
	if err := json.Unmarshal(inspector(t, dir, append([]string{"--method", "tools/list", "--"}, target...)...), &list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
	}
	return names
}

// TestExampleMCPNamesEveryHostAccepts: examples/mcp.yaml — toold's own
// tools and the two reference servers it hosts — as the Go SDK's client
// (2025-11-25 and 2026-07-28) and the MCP Inspector's CLI see it, over
// HTTP and over stdio: every listed name fits the hosts' rule, and the
// hosted echo answers by the name listed (and by its canonical name).
func TestExampleMCPNamesEveryHostAccepts(t *testing.T) {
	dir := interop(t)
	bin, err := buildToold()
	if err != nil {
		t.Fatal(err)
	}
	chdir(t, "../..") // as the example's header says: run from the repository's root, test/mcp the workspace
	root, _ := os.Getwd()
	in := start(t, nil, "-config", "examples/mcp.yaml", "-workspace", "test/mcp")
	waitReady(t, in)
	stdioArgs := []string{"-stdio", "-config", "examples/mcp.yaml", "-workspace", filepath.Join(root, "test", "mcp"), "-log-level", "warn"}

	for _, version := range mcpVersions {
		cs := goClient(t, &mcp.StreamableClientTransport{Endpoint: in.url + "/mcp", MaxRetries: -1}, version, nil)
		checkHostNames(t, "http "+version, listedWith(t, cs, "everything__echo"), 29)
		callEcho(t, "http "+version, cs)

		cs = goClient(t, &mcp.CommandTransport{Command: exec.Command(bin, stdioArgs...)}, version, nil)
		// Over stdio without a state store the tools that always wait
		// (request_user_input, a human confirmation) are not listed
		// (issue 45): two fewer.
		stdio := listedWith(t, cs, "everything__echo")
		checkHostNames(t, "stdio "+version, stdio, 27)
		if slices.Contains(stdio, "request_user_input") {
			t.Errorf("stdio %s without a store lists request_user_input, which it would refuse", version)
		}
		callEcho(t, "stdio "+version, cs)
	}

	checkHostNames(t, "the Inspector over HTTP", inspectorNames(t, dir, in.url+"/mcp"), 29)
	// Over stdio the Go SDK's client checked the listing; the Inspector
	// calls by the listed name.
	stdioTarget := append([]string{bin}, stdioArgs...)
	for who, target := range map[string][]string{"HTTP": {in.url + "/mcp"}, "stdio": stdioTarget} {
		res := inspector(t, dir, append([]string{"--method", "tools/call", "--tool-name", "everything__echo",
			"--tool-arg", "message=from the Inspector", "--"}, target...)...)
		if !strings.Contains(string(res), "from the Inspector") || strings.Contains(string(res), `"isError":true`) {
			t.Errorf("the Inspector's call over %s: %s", who, res)
		}
	}
}

// TestEveryRenderingIsPortable: examples/mcp.yaml — toold's own tools and
// the two reference servers it hosts, whose schemas toold did not write —
// rendered for each consumer, breaks none of the portable subset's rules
// (registry.PortabilityProblems: one type per schema, no empty or bare-true
// schema, no remote $ref; what Gemini's function declarations and the
// strict hosts take), and the MCP Inspector's --strict check reports
// nothing on /mcp: no error and no warning.
func TestEveryRenderingIsPortable(t *testing.T) {
	dir := interop(t)
	chdir(t, "../..")
	in := start(t, nil, "-config", "examples/mcp.yaml", "-workspace", "test/mcp")
	waitReady(t, in)

	schemaKeys := map[string][]string{
		"native":    {"parameters", "output"},
		"openai":    {"function.parameters"},
		"anthropic": {"input_schema"},
		"mcp":       {"inputSchema", "outputSchema"},
	}
	for format, keys := range schemaKeys {
		status, body := in.get("/tools?format=" + format)
		if status != 200 {
			t.Fatalf("%s listing: %d %s", format, status, body)
		}
		var items []map[string]any
		if format == "openai" || format == "anthropic" {
			err := json.Unmarshal(body, &items)
			if err != nil {
				t.Fatal(err)
			}
		} else {
			var l struct{ Tools []map[string]any }
			if err := json.Unmarshal(body, &l); err != nil {
				t.Fatal(err)
			}
			items = l.Tools
		}
		if len(items) < 29 {
			t.Fatalf("%s lists %d tools", format, len(items))
		}
		schemas := 0
		for _, it := range items {
			for _, key := range keys {
				var v any = it
				for _, part := range strings.Split(key, ".") {
					m, _ := v.(map[string]any)
					v = m[part]
				}
				if v == nil {
					continue
				}
				schemas++
				raw, _ := json.Marshal(v)
				if p := registry.PortabilityProblems(raw); len(p) > 0 {
					t.Errorf("%s: %v's %s: %v", format, it["name"], key, p)
				}
			}
		}
		if schemas < len(items) {
			t.Errorf("%s: %d schemas for %d tools", format, schemas, len(items))
		}
	}

	findings := inspectorStrict(t, dir, in.url+"/mcp")
	if len(findings) > 0 {
		t.Errorf("the Inspector's --strict check reports: %s", findings)
	}
}

// inspectorStrict lists target's tools with the Inspector CLI's --strict
// check and returns its findings (warnings too; an error-severity finding
// fails the run).
func inspectorStrict(t *testing.T, dir string, target ...string) json.RawMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cli := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js")
	args := append([]string{cli, "--cli", "--format", "json", "-q", "--strict", "--method", "tools/list", "--"}, target...)
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the Inspector CLI --strict: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	var out struct {
		Result         json.RawMessage
		SchemaFindings json.RawMessage
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || out.Result == nil {
		t.Fatalf("the Inspector CLI's output %q: %v", stdout.String(), err)
	}
	return out.SchemaFindings
}
