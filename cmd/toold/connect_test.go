package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toold/toold/internal/testpeer"
)

// connectEntry is one server of a host's MCP configuration: a command it
// launches (stdio) or a URL it connects to (Streamable HTTP).
type connectEntry struct {
	Type    string   `json:"type"`
	Command string   `json:"command"`
	Args    []string `json:"args"`
	URL     string   `json:"url"`
}

// TestConnectConfigs runs every host configuration in examples/connect as
// its host would: a command entry is launched (with the built toold for
// the placeholder of its absolute path, and a workspace for the
// workspace's), a URL entry is connected to a toold started on loopback;
// each must list the file tools over MCP. A command names toold by its
// absolute path, which the README and examples/connect say how to find: a
// desktop host does not see $(go env GOPATH)/bin on its PATH.
func TestConnectConfigs(t *testing.T) {
	t.Parallel() // no chdir, no environment of its own: it may run beside others
	bin, err := buildToold()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("../../examples/connect/*.json")
	if len(files) < 3 {
		t.Fatalf("examples/connect holds %d host configurations", len(files))
	}
	ws := workspace(t)
	in := start(t, nil, "-workspace", ws) // for the URL entries
	for _, f := range files {
		entries := connectEntries(t, f)
		if len(entries) != 1 {
			// One shape per host: two entries (stdio and HTTP) list every tool
			// twice, and the HTTP one fails while no toold runs.
			t.Fatalf("%s names %d servers, want one: %v", f, len(entries), sortedKeys(entries))
		}
		for name, e := range entries {
			if e.URL != "" && e.Type == "" {
				t.Errorf("%s: %s has a url and no type: Claude Code refuses such an entry (\"type\": \"http\")", f, name)
			}
		}
		for name, e := range entries {
			t.Run(filepath.Base(f)+"/"+name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				var transport mcp.Transport
				switch {
				case e.Command != "":
					if e.Command != tooldPlaceholder {
						t.Fatalf("command %q: a desktop host may not see toold's directory on its PATH; name it %s, whose "+
							"absolute path the README says how to find", e.Command, tooldPlaceholder)
					}
					args := slices.Clone(e.Args)
					for i, a := range args {
						if a == "/path/to/your/project" || a == "${workspaceFolder}" {
							args[i] = ws
						}
					}
					if !slices.Contains(args, "-workspace") {
						t.Fatalf("%v: a stdio entry names its workspace", args)
					}
					cmd := exec.CommandContext(ctx, bin, args...)
					cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+t.TempDir())
					transport = &mcp.CommandTransport{Command: cmd}
				case e.URL != "":
					if !strings.HasPrefix(e.URL, "http://127.0.0.1:8080/") {
						t.Fatalf("url %q: the README's server listens on 127.0.0.1:8080", e.URL)
					}
					transport = &mcp.StreamableClientTransport{Endpoint: in.url + strings.TrimPrefix(e.URL, "http://127.0.0.1:8080"), MaxRetries: -1}
				default:
					t.Fatal("an entry with neither command nor url")
				}
				cs, err := mcp.NewClient(&mcp.Implementation{Name: "connect-test", Version: "1"}, nil).Connect(ctx, transport, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer cs.Close()
				res, err := cs.ListTools(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				var names []string
				for _, tl := range res.Tools {
					names = append(names, tl.Name)
				}
				if !slices.Contains(names, "read_file") {
					t.Fatalf("tools/list: %v", names)
				}
				call, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"paths": []string{"hello.txt"}}})
				if err != nil || call.IsError {
					t.Fatalf("read_file: %v %+v", err, call)
				}
			})
		}
	}
}

// tooldPlaceholder stands for toold's absolute path in the host
// configurations.
const tooldPlaceholder = "/path/to/toold"

// TestConnectSaysAbsolutePath: the README's "Connect an agent" and
// examples/connect/README.md tell the reader to put the absolute path of
// toold for the placeholder, why, and how to find it.
func TestConnectSaysAbsolutePath(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	section, _, _ := strings.Cut(string(readme[strings.Index(string(readme), "## Connect an agent"):]), "\n## Tests")
	connect, err := os.ReadFile("../../examples/connect/README.md")
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"README.md, Connect an agent": section, "examples/connect/README.md": string(connect)} {
		text = strings.Join(strings.Fields(text), " ")
		for _, want := range []string{"absolute path", tooldPlaceholder, "$(go env GOPATH)/bin", "command -v toold"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s does not say %q", name, want)
			}
		}
	}
}

// TestRESTLoop runs examples/connect/rest_loop.mjs, the agent loop over
// REST, against a toold on loopback.
func TestRESTLoop(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		testpeer.Missing(t, "TOOLD_REQUIRE_NPM", "node is not installed (.ci/run installs Debian's nodejs): examples/connect/rest_loop.mjs is not run")
	}
	in := start(t, nil, "-workspace", workspace(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, node, "../../examples/connect/rest_loop.mjs", in.url, "read_file", `{"paths":["hello.txt"]}`).CombinedOutput()
	if err != nil {
		t.Fatalf("rest_loop.mjs: %v\n%s", err, out)
	}
	var got struct {
		Offered []string
		Result  struct {
			Files []struct{ Content string }
		}
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("rest_loop.mjs printed %s: %v", out, err)
	}
	if !slices.Contains(got.Offered, "read_file") || len(got.Result.Files) != 1 || !strings.Contains(got.Result.Files[0].Content, "hello") {
		t.Fatalf("rest_loop.mjs: %s", out)
	}
}
