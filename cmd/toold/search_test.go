package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// toolsetConfig serves the file tools, echo and sleep, with a toolset of
// the file tools that only read.
const toolsetConfig = `
tools:
  echo: {enabled: true}
  sleep: {enabled: true}
toolsets:
  reading:
    description: Read files in the workspace.
    tools: [read_file, list_files]
`

// tsToolset is what test/mcp/toolset.mjs reports.
type tsToolset struct {
	Tools []string
	Calls map[string]struct {
		IsError bool
		Error   *struct {
			Code    int
			Message string
		}
	}
	Search struct {
		IsError    bool
		Structured struct {
			Tools []struct{ Name string }
		}
	}
}

// TestToolsetWithTheTypeScriptSDK: the official TypeScript client of
// /mcp/reading sees only the toolset's tools (and search_tools), may call
// them and no other, and its searches find only them.
func TestToolsetWithTheTypeScriptSDK(t *testing.T) {
	dir := interop(t)
	ws := sharedWorkspace(t)
	cfg := filepath.Join(t.TempDir(), "toold.yaml") // toold's own files lie outside the workspace
	if err := os.WriteFile(cfg, []byte(toolsetConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	in := start(t, nil, "-config", cfg, "-workspace", ws)
	var s tsToolset
	runNodeScript(t, dir, "toolset.mjs", &s, in.url+"/mcp/reading", "wait sleep echo message read files list", "list_files", "echo")
	slices.Sort(s.Tools)
	if want := []string{"list_files", "read_file", "search_tools"}; !slices.Equal(s.Tools, want) {
		t.Errorf("tools/list: %v, want %v", s.Tools, want)
	}
	if c := s.Calls["list_files"]; c.Error != nil || c.IsError {
		t.Errorf("list_files, a member: %+v", c)
	}
	if c := s.Calls["echo"]; c.Error == nil {
		t.Errorf("echo, not a member, was called: %+v", c)
	}
	var found []string
	for _, m := range s.Search.Structured.Tools {
		found = append(found, m.Name)
	}
	slices.Sort(found)
	if s.Search.IsError || !slices.Equal(found, []string{"list_files", "read_file"}) {
		t.Errorf("search_tools in the toolset found %v", found)
	}
	// The whole catalog still lists everything, search_tools among it.
	status, body := in.get("/tools/search?q=echo+a+message&toolset=reading")
	if status != 200 || bytes.Contains(body, []byte(`"echo"`)) {
		t.Errorf("GET /tools/search?toolset=reading: %d %s", status, body)
	}
}
