package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toold/toold/internal/ospath"
)

// installPaths are where the README's Install section puts the release
// binary on each desktop; a host app started from the Dock or the Start
// menu has no shell PATH, so its configuration names the binary by that
// absolute path.
var installPaths = map[string]struct {
	plat   ospath.Platform
	bin    string // in the configurations, for a user named "you"
	readme string // as the README says it
}{
	"macos":   {ospath.Darwin, "/usr/local/bin/toold", "/usr/local/bin/toold"},
	"windows": {ospath.Windows, `C:\Users\you\AppData\Local\Programs\toold\toold.exe`, `%LOCALAPPDATA%\Programs\toold\toold.exe`},
}

// TestConnectConfigsPerPlatform: every host configuration of
// examples/connect has a macOS and a Windows twin (examples/connect/macos,
// examples/connect/windows) naming the same servers, whose stdio entries
// start toold by the absolute path the README installs it to, with the
// same flags and a workspace that is absolute on that platform; and the
// README's Install section names those paths. (TestConnectConfigs runs
// the Linux ones; no Mac or Windows runs these here.)
func TestConnectConfigsPerPlatform(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	hosts, _ := filepath.Glob("../../examples/connect/*.json")
	if len(hosts) == 0 {
		t.Fatal("no host configs in examples/connect: nothing to hold to the platforms' paths")
	}
	for dir, want := range installPaths {
		if !strings.Contains(string(readme), "`"+want.readme+"`") {
			t.Errorf("README.md does not say where %s's binary goes (`%s`)", dir, want.readme)
		}
		for _, host := range hosts {
			t.Run(dir+"/"+filepath.Base(host), func(t *testing.T) {
				base := connectEntries(t, host)
				twin := connectEntries(t, filepath.Join(filepath.Dir(host), dir, filepath.Base(host)))
				if !slices.Equal(sortedKeys(base), sortedKeys(twin)) {
					t.Fatalf("servers %v, the Linux configuration's are %v", sortedKeys(twin), sortedKeys(base))
				}
				for name, e := range twin {
					if (e.Command == "") != (base[name].Command == "") || e.Type != base[name].Type {
						t.Errorf("%s: %+v, the Linux configuration's is %+v: one shape per host, whatever the platform", name, e, base[name])
					}
				}
				stdio := 0
				for name, e := range twin {
					if e.Command == "" {
						continue
					}
					stdio++
					if e.Command != want.bin || !want.plat.IsAbs(e.Command) {
						t.Errorf("%s: command %q, want the installed binary %q", name, e.Command, want.bin)
					}
					checkStdioArgs(t, want.plat, name, e.Args, base[name])
				}
				if stdio == 0 {
					t.Error("no entry starts toold: the twin exists to show the binary's path")
				}
			})
		}
	}
}

// checkStdioArgs holds a twin's arguments to the Linux entry's (when that
// one is stdio too): the same flags, the workspace absolute on plat or the
// host's own ${workspaceFolder}.
func checkStdioArgs(t *testing.T, plat ospath.Platform, name string, args []string, linux connectEntry) {
	t.Helper()
	i := slices.Index(args, "-workspace")
	if !slices.Contains(args, "-stdio") || i < 0 || i+1 >= len(args) {
		t.Fatalf("%s: %v: a stdio entry passes -stdio and names its workspace", name, args)
	}
	if ws := args[i+1]; ws != "${workspaceFolder}" && (!plat.IsAbs(ws) || plat.VolumeName(ws) == "" && plat.OS == "windows") {
		t.Errorf("%s: workspace %q is not an absolute path on %s", name, ws, plat.OS)
	}
	if linux.Command == "" {
		return
	}
	same := func(a []string) []string { return slices.Delete(slices.Clone(a), i+1, i+2) }
	if j := slices.Index(linux.Args, "-workspace"); j != i || !slices.Equal(same(args), same(linux.Args)) {
		t.Errorf("%s: args %v, the Linux entry's are %v", name, args, linux.Args)
	}
}

// connectEntries are the servers of one host configuration file.
func connectEntries(t *testing.T, file string) map[string]connectEntry {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		MCPServers map[string]connectEntry `json:"mcpServers"` // Claude Desktop, Cursor, most hosts
		Servers    map[string]connectEntry `json:"servers"`    // VS Code
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if doc.MCPServers != nil {
		return doc.MCPServers
	}
	return doc.Servers
}

func sortedKeys(m map[string]connectEntry) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
