package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/problems"
	"github.com/toold/toold/internal/tools"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func write(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "toold.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaultIsValid(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:8080" || c.Workspace != "." || !c.Enabled("read_file", false) || c.Enabled("write_file", true) {
		t.Errorf("unexpected defaults: %+v", c)
	}
}

func TestLoadOverlaysDefaults(t *testing.T) {
	p := write(t, `
listen: 127.0.0.1:${PORT}
workspace: ${WS:-/srv/work}
tools:
  write_file: {enabled: true, limits: {timeout: 2s, max_in_flight: 3}}
categories:
  direct: {max_queue: 5}
server:
  max_body_bytes: ${BODY}
`)
	c, err := Load(p, env(map[string]string{"PORT": "9999", "BODY": "2048"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:9999" || c.Workspace != "/srv/work" || c.Server.MaxBodyBytes != 2048 {
		t.Errorf("expansion: listen %q workspace %q body %d", c.Listen, c.Workspace, c.Server.MaxBodyBytes)
	}
	if !c.Enabled("write_file", false) || !c.Enabled("read_file", false) {
		t.Errorf("tool map did not overlay the defaults: %+v", c.Tools)
	}
	if got := c.Tools["write_file"].Limits; got.Timeout != 2*time.Second || got.MaxInFlight != 3 {
		t.Errorf("tool limits: %+v", got)
	}
	if q := c.Categories["direct"].MaxQueue; q == nil || *q != 5 || c.AdminListen != "127.0.0.1:9090" {
		t.Errorf("categories %+v admin %q", c.Categories, c.AdminListen)
	}
}

func TestEveryProblemAsPathMessage(t *testing.T) {
	p := write(t, `
listen: "0.0.0.0:80"
log_level: chatty
lisen: x
tools:
  read_file: {limits: {timout: 1s}}
  grep: {limits: {target: 2s, max: 1s}}
  "bad name": {}
auth:
  keys:
    - {name: ci, sha256: nothex, tools: []}
categories:
  misc: {}
  direct: {timeout: 100ms}
server:
  allowed_origins: ["not a url"]
  max_body_bytes: -1
workspace: ${MISSING}
`)
	_, err := Load(p, env(nil))
	got := problemMap(t, err)
	want := map[string]string{
		"lisen":                         `did you mean "listen"`,
		"tools.read_file.limits.timout": `did you mean "timeout"`,
		"workspace":                     "MISSING is not set",
	}
	for path, say := range want {
		if !strings.Contains(got[path], say) {
			t.Errorf("%s: %q, want it to say %q (all: %v)", path, got[path], say, got)
		}
	}
	// Unknown keys stop decoding; fix them and the value problems appear.
	p = write(t, `
listen: "0.0.0.0:80"
log_level: chatty
tools:
  grep: {limits: {target: 2s, max: 1s}}
  "bad name": {}
auth:
  keys:
    - {name: ci, sha256: nothex, tools: []}
categories:
  misc: {}
  direct: {timeout: 100ms}
server:
  allowed_origins: ["not a url"]
  max_body_bytes: -1
`)
	_, err = Load(p, env(nil))
	got = problemMap(t, err)
	want = map[string]string{
		"log_level":                "not one of",
		"tools.grep.limits":        "above max",
		"tools.bad name":           "not a valid tool name",
		"auth.keys.0.sha256":       "64 characters",
		"auth.keys.0.tools":        "at least 1",
		"categories.misc":          "not one of",
		"categories.direct":        "above timeout",
		"server.allowed_origins.0": "not a URL",
		"server.max_body_bytes":    "at least 0",
	}
	for path, say := range want {
		if !strings.Contains(got[path], say) {
			t.Errorf("%s: %q, want it to say %q", path, got[path], say)
		}
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		if path, msg, ok := strings.Cut(line, ": "); !ok || path == "" || msg == "" {
			t.Errorf("line %q is not path: message", line)
		}
	}
}

func TestTypeErrorsNamePath(t *testing.T) {
	p := write(t, "server:\n  max_body_bytes: lots\n")
	_, err := Load(p, env(nil))
	if err == nil || !strings.HasPrefix(err.Error(), "server.max_body_bytes: ") {
		t.Fatalf("error %v does not start with the path", err)
	}
}

func TestNonLoopbackNeedsAuthOrFlag(t *testing.T) {
	c := Default()
	c.Listen = "0.0.0.0:8080"
	if err := c.Validate(); err == nil {
		t.Fatal("non-loopback without keys accepted")
	}
	c.InsecureNoAuth = true
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.InsecureNoAuth = false
	c.Auth.Keys = []Key{{Name: "a", SHA256: strings.Repeat("ab", 32), Tools: []string{"*"}}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestExpand(t *testing.T) {
	e := env(map[string]string{"A": "1", "EMPTY": ""})
	tests := []struct{ in, want, err string }{
		{"plain", "plain", ""},
		{"${A}x", "1x", ""},
		{"$$A", "$A", ""},
		{"${B:-def}", "def", ""},
		{"${EMPTY:-def}", "def", ""},
		{"${EMPTY}", "", ""},
		{"${B}", "", "B is not set"},
		{"${A", "", "unterminated"},
		{"${1x}", "", "not an environment variable name"},
		{"cost $5", "cost $5", ""},
		{"Bearer ${user:github} ${A}", "Bearer ${user:github} 1", ""},
	}
	for _, tt := range tests {
		got, err := expand(tt.in, e)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("expand(%q) error %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("expand(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestEnvCannotAddStructure(t *testing.T) {
	p := write(t, "workspace: ${WS}\n")
	c, err := Load(p, env(map[string]string{"WS": "x\nlisten: 0.0.0.0:1"}))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("127.0.0.1:8080", c.Listen); diff != "" {
		t.Errorf("an environment value changed another key: %s", diff)
	}
}

// FuzzParse: no config text makes the loader panic.
func FuzzParse(f *testing.F) {
	f.Add([]byte("listen: 127.0.0.1:1\ntools: {read_file: {enabled: true}}\n"))
	f.Add([]byte("a: &x [*x]\n"))
	f.Add(DefaultYAML())
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parse(data, env(map[string]string{"A": "1"}), Default())
		if err == nil {
			_ = c.Validate()
		}
	})
}

func TestMaxQueueZeroMeansNoQueue(t *testing.T) {
	c, err := Load(write(t, "tools:\n  grep: {limits: {max_queue: 0}}\n  read_file: {limits: {max_in_flight: 2}}\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Tools["grep"].Limits.Limits().MaxQueue; got != tools.NoQueue {
		t.Errorf("max_queue: 0 became %d, want NoQueue", got)
	}
	if got := c.Tools["read_file"].Limits.Limits().MaxQueue; got != 0 {
		t.Errorf("absent max_queue became %d, want 0 (inherit)", got)
	}
}

// TestHTTPSection: the http section's field rules and tools.<name>.fallback
// are checked with the rest, each problem at its path.
func TestHTTPSection(t *testing.T) {
	_, err := Load(write(t, `
http:
  proxy: "not a url"
  breaker: {failures: -1}
  hosts: {api.example.com: {rate: {per_second: -2}}}
  tools:
    - {name: x, request: {method: FETCH}, response: {format: xml}, retry: {attempts: 50}}
tools:
  read_file: {fallback: ["bad name"]}
`), env(nil))
	got := problemMap(t, err)
	for path, say := range map[string]string{
		"http.proxy":            "not a URL",
		"http.breaker.failures": "at least 0",
		"http.hosts.api.example.com.rate.per_second": "at least 0",
		"http.tools.0.description":                   "is required",
		"http.tools.0.request.url":                   "is required",
		"http.tools.0.request.method":                "not one of",
		"http.tools.0.response.format":               "not one of",
		"http.tools.0.retry.attempts":                "at most 10",
		"tools.read_file.fallback.0":                 "not a valid tool name",
	} {
		if !strings.Contains(got[path], say) {
			t.Errorf("%s: %q, want it to say %q (all: %v)", path, got[path], say, got)
		}
	}
}

// problemMap is a config error's problems, message by path.
func problemMap(t *testing.T, err error) map[string]string {
	t.Helper()
	cerr, ok := err.(*Error)
	if !ok {
		t.Fatalf("error %T %v", err, err)
	}
	got := map[string]string{}
	for _, pr := range cerr.Problems {
		got[pr.Path] = pr.Message
	}
	return got
}

// TestConsultSection: the consult section's field rules and its own
// checks (a routing table naming a provider that is not configured) are
// reported with the rest, each at its path.
func TestConsultSection(t *testing.T) {
	_, err := Load(write(t, `
consult:
  providers:
    gemini: {prompt: carrier-pigeon, max_in_flight: -1}
    local: {base_url: "http://127.0.0.1:11434/v1"}
  routing: {assertion: [gemini, codex]}
  synthesis: gemnii
  max_prompt_bytes: -5
`), env(nil))
	got := problemMap(t, err)
	for path, say := range map[string]string{
		"consult.providers.gemini.prompt":        "not one of",
		"consult.providers.gemini.max_in_flight": "at least 0",
		"consult.max_prompt_bytes":               "at least 0",
		"consult.routing.assertion[1]":           `"codex" is not a configured provider (providers: gemini, local)`,
		"consult.synthesis":                      `"gemnii" is not a configured provider (did you mean "gemini"?)`,
		"consult.providers.local.default_model":  "is required for an api provider",
	} {
		if !strings.Contains(got[path], say) {
			t.Errorf("%s: %q, want it to say %q (all: %v)", path, got[path], say, got)
		}
	}
}

// TestRolesAreAuthRoles: a key's roles are checked against auth.Roles, the
// one list of roles: each is accepted, and an unknown one is refused at
// its path, naming them all.
func TestRolesAreAuthRoles(t *testing.T) {
	names := make([]string, len(auth.Roles))
	for i, r := range auth.Roles {
		names[i] = string(r)
	}
	key := func(roles ...string) string {
		return fmt.Sprintf("auth:\n  keys:\n    - {name: ci, sha256: %s, tools: [\"*\"], roles: [%s]}\n",
			strings.Repeat("a", 64), strings.Join(roles, ", "))
	}
	if _, err := Load(write(t, key(names...)), env(nil)); err != nil {
		t.Errorf("every role of auth.Roles: %v", err)
	}
	_, err := Load(write(t, key(names[0], "root")), env(nil))
	got := problemMap(t, err)["auth.keys.0.roles.1"]
	if want := `"root" is not one of: ` + strings.Join(names, ", "); got != want {
		t.Errorf("an unknown role: %q, want %q (all: %v)", got, want, err)
	}
}

// TestAddSection: a section's listed problems land each at its path, and
// an error that lists none is kept whole at the section, not dropped.
func TestAddSection(t *testing.T) {
	list := &problems.List{Section: "consult"}
	list.Add("routing.assertion[1]", "not configured")
	list.Add("synthesis", "not configured either")
	probs := &Error{}
	probs.addSection("consult", list.Err())
	probs.addSection("consult", fmt.Errorf("wrapped: %w", errors.New("not a list")))
	probs.addSection("consult", nil)
	want := []Problem{
		{"consult.routing.assertion[1]", "not configured"},
		{"consult.synthesis", "not configured either"},
		{"consult", "wrapped: not a list"},
	}
	if diff := cmp.Diff(want, probs.Problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

// TestUpstreamLimitsOverCategories: an upstream server's limits are checked
// as the registry will resolve its tools', over categories.mcp: limits that
// work with the operator's category defaults are accepted, and limits that
// do not are refused here rather than tool by tool once the server is up.
func TestUpstreamLimitsOverCategories(t *testing.T) {
	_, err := Load(write(t, `
categories:
  mcp: {timeout: 60s, max: 30s}
mcp:
  servers:
    - {name: a, command: x, limits: {max: 20s}, tool_limits: {slow: {max: 25s}}}
`), env(nil))
	if err != nil {
		t.Errorf("limits that work over categories.mcp were refused: %v", err)
	}
	_, err = Load(write(t, `
categories:
  mcp: {target: 5s, max: 8s, timeout: 20s}
mcp:
  servers:
    - {name: a, command: x, limits: {timeout: 6s}, tool_limits: {quick: {timeout: 7s, max: 4s}}}
`), env(nil))
	problemMap(t, err) // a configuration error
	for _, say := range []string{"mcp.servers[0]: limits: max 8s is above timeout 6s",
		"mcp.servers[0]: tool_limits.quick: target 5s is above max 4s"} {
		if !strings.Contains(err.Error(), say) {
			t.Errorf("want %q among the problems:\n%v", say, err)
		}
	}
}

// TestUpstreamLimitsRefused: impossible limits of an upstream server are
// refused whatever the categories say.
func TestUpstreamLimitsRefused(t *testing.T) {
	_, err := Load(write(t, "mcp:\n  servers:\n    - {name: a, command: x, limits: {timeout: 1ms}}\n"), env(nil))
	if got := problemMap(t, err); !strings.Contains(got["mcp.servers[0]"], "limits: max 3s is above timeout 1ms") {
		t.Errorf("impossible limits: %v", got)
	}
}

// TestStateCredentials: a listening embedded store without credentials, with
// a guessable one, or off loopback without TLS is refused with the path to
// fix; an external store's credentials are not held to the listener's rules.
func TestStateCredentials(t *testing.T) {
	long := strings.Repeat("x", 32)
	for _, tt := range []struct {
		nats string
		want string // a problem path, or "" for none
	}{
		{`{listen: "127.0.0.1:4222"}`, "state.nats.listen"},
		{`{listen: "127.0.0.1:4222", token: short}`, "state.nats.token"},
		{`{listen: "127.0.0.1:4222", user: u, password: short}`, "state.nats.password"},
		{`{listen: "127.0.0.1:4222", token: ` + long + `}`, ""},
		{`{listen: "127.0.0.1:4222", nkey_seed_file: /etc/toold/nats.nk}`, ""},
		{`{listen: "127.0.0.1:4222", tls: {ca_file: ca.pem, cert_file: c.pem, key_file: k.pem}}`, ""},
		{`{listen: "127.0.0.1:4222", tls: {cert_file: c.pem, key_file: k.pem}}`, "state.nats.listen"},
		{`{listen: "0.0.0.0:4222", token: ` + long + `}`, "state.nats.tls"},
		{`{listen: "127.0.0.1:4222", credentials: x.creds}`, "state.nats.credentials"},
		{`{url: "nats://n:4222", token: t, user: u, password: p}`, "state.nats"},
		{`{url: "nats://n:4222", token: short}`, ""},
		{`{url: "nats://n:4222", tls: {cert_file: c.pem}}`, "state.nats.tls"},
	} {
		f := filepath.Join(t.TempDir(), "c.yaml")
		os.WriteFile(f, []byte("state: {nats: "+tt.nats+"}\n"), 0o600)
		_, err := Load(f, func(string) (string, bool) { return "", false })
		var ce *Error
		errors.As(err, &ce)
		var paths []string
		if ce != nil {
			for _, p := range ce.Problems {
				paths = append(paths, p.Path)
			}
		}
		if (tt.want == "") != (err == nil) || tt.want != "" && !slices.Contains(paths, tt.want) {
			t.Errorf("nats %s: %v, want a problem at %q", tt.nats, err, tt.want)
		}
	}
}

// TestUserReferencesStay: ${user:name} is the caller's own credential,
// resolved per call: the configuration keeps it as written, whatever the
// environment holds, and still expands ${VAR} beside it.
func TestUserReferencesStay(t *testing.T) {
	env := func(k string) (string, bool) {
		if k == "PREFIX" {
			return "token", true
		}
		return "", false
	}
	for in, want := range map[string]string{
		"${user:github}":           "${user:github}",
		"Bearer ${user:github}":    "Bearer ${user:github}",
		"${PREFIX} ${user:jira.x}": "token ${user:jira.x}",
	} {
		got, err := expand(in, env)
		if err != nil || got != want {
			t.Errorf("%q: %q %v, want %q", in, got, err, want)
		}
	}
}
