package config

import (
	"fmt"
	"strings"
	"testing"
)

// TestSandboxKeysEverywhere: the sandbox keys are one type (launch.Sandbox)
// embedded inline in a command tool's, execute_command's, a stdio MCP
// server's and a consultation CLI's sandbox, and the commands section
// embeds the launcher's settings (launch.Config) the same way. The loader
// takes the keys at the level they are written, suggests them for a typo
// and names each value problem at its path, the embedding no step of it.
func TestSandboxKeysEverywhere(t *testing.T) {
	body := `
commands:
  containment: %s
  rlimits: {cpu: %s}
  tools:
    - name: t
      description: d
      argv: ["true"]
      sandbox: {containment: %s, read_only_paths: [/opt], env_allow: ["%s"], limits: {timeout: 5s}}
  execute_command:
    sandbox: {network: true, %s: [/opt]}
mcp:
  servers:
    - name: s
      command: x
      sandbox: {containment: %s, workspace_writable: true, rlimits: {memory: 1000000}}
consult:
  providers:
    gemini:
      sandbox: {containment: %s, network: false, path: [/usr/bin], max_output_bytes: 4096}
`
	fill := func(bad bool, key string) string {
		v := []any{"none", "30s", "none", "LANG", key, "none", "none"}
		if bad {
			v = []any{"chroot", "-5s", "chroot", "A=B", key, "chroot", "chroot"}
		}
		return fmt.Sprintf(body, v...)
	}
	if _, err := Load(write(t, fill(false, "read_only_paths")), env(nil)); err != nil {
		t.Fatalf("every sandbox key at its place: %v", err)
	}
	_, err := Load(write(t, fill(false, "read_only_path")), env(nil))
	if got := problemMap(t, err); !strings.Contains(got["commands.execute_command.sandbox.read_only_path"], `did you mean "read_only_paths"`) {
		t.Errorf("a typo of an inline key: %v", got)
	}
	_, err = Load(write(t, fill(true, "read_only_paths")), env(nil))
	got := problemMap(t, err)
	for path, say := range map[string]string{
		"commands.containment":                         "not one of",
		"commands.rlimits.cpu":                         "at least -1",
		"commands.tools.0.sandbox.containment":         "not one of",
		"commands.tools.0.sandbox.env_allow.0":         "excludesall",
		"mcp.servers.0.sandbox.containment":            "not one of",
		"consult.providers.gemini.sandbox.containment": "not one of",
	} {
		if !strings.Contains(got[path], say) {
			t.Errorf("%s: %q, want it to say %q (all: %v)", path, got[path], say, got)
		}
	}
}

// TestSandboxNetworkForms: network takes true, false or an allow-list
// mapping wherever a sandbox is written; the mapping's keys are checked
// like any other (a typo is named with a suggestion), its values by
// their rules at their paths, ${ENV} in an injected value is expanded at
// load and ${user:NAME} is kept for the run.
func TestSandboxNetworkForms(t *testing.T) {
	body := `
commands:
  tools:
    - name: t
      description: d
      argv: ["true"]
      sandbox:
        network:
          allow: [api.github.com, "*.npmjs.org", "127.0.0.1:8443"]
          inject:
            - {host: api.github.com, header: Authorization, value: "Bearer ${GH}"}
            - {host: api.github.com, header: X-User, value: "${user:github}"}
          max_connections: %s
  execute_command:
    sandbox: {network: true}
mcp:
  servers:
    - name: s
      command: x
      sandbox: {network: {%s: [a.test]}}
consult:
  providers:
    gemini:
      sandbox: {network: false}
`
	c, err := Load(write(t, fmt.Sprintf(body, "10", "allow")), env(map[string]string{"GH": "tok"}))
	if err != nil {
		t.Fatal(err)
	}
	n := c.Commands.Tools[0].Sandbox.Network
	p := n.AllowList()
	if p == nil || len(p.Allow) != 3 || p.Inject[0].Value != "Bearer tok" || p.Inject[1].Value != "${user:github}" || p.MaxConnections != 10 {
		t.Errorf("the allow-list: %+v", p)
	}
	if !c.Commands.ExecuteCommand.Sandbox.Network.On() || c.Commands.ExecuteCommand.Sandbox.Network.AllowList() != nil {
		t.Error("network: true")
	}
	if c.Consult.Providers["gemini"].Sandbox.Network.On() {
		t.Error("network: false")
	}
	_, err = Load(write(t, fmt.Sprintf(body, "-1", "alow")), env(map[string]string{"GH": "tok"}))
	got := problemMap(t, err)
	if !strings.Contains(got["mcp.servers[0].sandbox.network.alow"], `did you mean "allow"`) {
		t.Errorf("a typo in the mapping: %v", got)
	}
	_, err = Load(write(t, fmt.Sprintf(body, "-1", "allow")), env(map[string]string{"GH": "tok"}))
	if got := problemMap(t, err); !strings.Contains(got["commands.tools.0.sandbox.network.max_connections"], "at least 0") {
		t.Errorf("a bound below zero: %v", got)
	}
}
