package consult

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/toold/toold/internal/egress"
	"github.com/toold/toold/internal/egress/egresstest"
	"github.com/toold/toold/internal/launch"
	"github.com/toold/toold/internal/launch/launchtest"
)

// TestPresetKeysMoveToTheProxy: a preset CLI whose key is in toold's
// environment gets an allow-list of its vendor's API host, the key as the
// header the proxy adds there, and a placeholder in its variable; the key
// stays in the environment when the provider set its network or
// env_allow itself, when toold has no key, or when an endpoint of its own
// is named.
func TestPresetKeysMoveToTheProxy(t *testing.T) {
	envOf := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	key := map[string]string{"ANTHROPIC_API_KEY": "sk-ant-real", "OPENAI_API_KEY": "sk-openai-real", "GEMINI_API_KEY": "AIza-real"}
	for name, want := range map[string]egress.Inject{
		"claude": {Host: "api.anthropic.com", Header: "X-Api-Key", Value: "sk-ant-real"},
		"codex":  {Host: "api.openai.com", Header: "Authorization", Value: "Bearer sk-openai-real"},
		"gemini": {Host: "generativelanguage.googleapis.com", Header: "X-Goog-Api-Key", Value: "AIza-real"},
	} {
		k, preset := apiKeys[name], presets[name].Sandbox
		sb, ok := k.injected(preset, preset.EnvAllow, envOf(key))
		p := sb.Network.AllowList()
		if !ok || p == nil || !slices.Equal(p.Allow, []string{want.Host}) || len(p.Inject) != 1 || p.Inject[0] != want {
			t.Errorf("%s: %v %+v", name, ok, p)
			continue
		}
		if sb.Env[k.Env] != keyPlaceholder || slices.Contains(sb.EnvAllow, k.Env) || len(preset.Sandbox.Env) != 0 {
			t.Errorf("%s: env %v, env_allow %v", name, sb.Env, sb.EnvAllow)
		}
		if _, ok := k.injected(preset, preset.EnvAllow, envOf(nil)); ok {
			t.Errorf("%s: injected without a key in toold's environment", name)
		}
		own := preset
		own.Network = launch.NetworkOn()
		if _, ok := k.injected(own, preset.EnvAllow, envOf(key)); ok {
			t.Errorf("%s: injected over the provider's own network", name)
		}
		own = preset
		own.EnvAllow = []string{k.Env}
		if _, ok := k.injected(own, preset.EnvAllow, envOf(key)); ok {
			t.Errorf("%s: injected over the provider's own env_allow", name)
		}
	}
	withBase := map[string]string{"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": "https://gateway.internal"}
	if _, ok := apiKeys["claude"].injected(presets["claude"].Sandbox, presets["claude"].Sandbox.EnvAllow, envOf(withBase)); ok {
		t.Error("injected for another endpoint")
	}
	if _, ok := apiKeys["cursor-agent"]; ok {
		t.Error("cursor-agent's key opens a session, not a header: it stays in its environment")
	}
}

// fakeClaude is a CLI that does what a consultation CLI does with its
// key: sends it to its vendor (FAKE_URL) over HTTPS through the proxy
// its variables name, and answers with what the vendor said and with its
// whole environment, as a prompt asking it to print its environment
// would make it.
const fakeClaude = `#!/usr/bin/python3
import json, os, sys, urllib.request
if sys.argv[1:] == ["--version"]:
    print("fake-claude 1.0"); sys.exit(0)
sys.stdin.read()
req = urllib.request.Request(os.environ["FAKE_URL"], data=b"{}", headers={"x-api-key": os.environ["ANTHROPIC_API_KEY"]})
body = urllib.request.urlopen(req, timeout=20).read().decode()
env = "\n".join(k + "=" + v for k, v in os.environ.items())
print(json.dumps({"type": "result", "is_error": False, "result": body + "\n" + env}))
`

// TestConsultKeyNeverInTheCLI: a consultation CLI whose key the proxy
// injects reaches its vendor with the key; the answer, which carries the
// vendor's echo of it and the CLI's whole environment, holds no key.
func TestConsultKeyNeverInTheCLI(t *testing.T) {
	const secret = "sk-ant-consult-secret-0123456789"
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		launchtest.Unavailable(t, "SKIPPED: the stand-in CLI runs on /usr/bin/python3 (apt-get install python3)")
	}
	for _, mode := range []string{"namespaces", "bwrap"} {
		t.Run(mode, func(t *testing.T) {
			needMode(t, mode)
			ca := egresstest.NewCA(t)
			srv := ca.Server(t, "api.anthropic.test")
			port := strconv.Itoa(srv.Port)
			e := newEnv(t)
			e.commands.Egress = egress.Options{Resolver: egresstest.Resolver(map[string]string{"api.anthropic.test": "127.0.0.1"})}
			if err := os.WriteFile(filepath.Join(e.fakes, "claude"), []byte(fakeClaude), 0o755); err != nil {
				t.Fatal(err)
			}
			pc := ProviderConfig{Command: filepath.Join(e.fakes, "claude"), Sandbox: Sandbox{Sandbox: launch.Sandbox{Containment: mode,
				Env: map[string]string{"FAKE_URL": "https://api.anthropic.test:" + port + "/v1/messages", "ANTHROPIC_API_KEY": keyPlaceholder},
				Network: launch.AllowList(egress.Policy{Allow: []string{"api.anthropic.test:" + port, "127.0.0.1:" + port},
					CAFiles: []string{ca.File}, Inject: []egress.Inject{{Host: "api.anthropic.test", Header: "X-Api-Key", Value: secret}}})}}}
			r := e.build(Config{Providers: map[string]ProviderConfig{"claude": pc}})
			resp := r.one(`{"prompt": "print your environment", "provider": "claude"}`)
			b, _ := json.Marshal(resp)
			// (toold's output sanitizer masks the variable's placeholder
			// as it would any key-like value.)
			if strings.Contains(string(b), secret) || !strings.Contains(resp.Output, egress.Redacted) ||
				!strings.Contains(resp.Output, "ANTHROPIC_API_KEY=") || !strings.Contains(resp.Output, "HTTPS_PROXY=http://127.0.0.1:") {
				t.Errorf("the answer: %s", b)
			}
			if s := srv.Seen(); len(s) != 1 || s[0].Header.Get("X-Api-Key") != secret {
				t.Errorf("the vendor saw %+v", s)
			}
		})
	}
}
