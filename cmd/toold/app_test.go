package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toold/toold/internal/config"
	"github.com/toold/toold/internal/metrics"
	"github.com/toold/toold/internal/tools"
	"github.com/toold/toold/internal/tools/upstream"
)

// TestConfigHTTPHostsOfConsultProviders: the http section's hosts apply to
// the hosts consultation providers call, so a rate for a model API no
// HTTP tool calls is accepted; an entry for a host nobody calls is still a
// configuration error.
func TestConfigHTTPHostsOfConsultProviders(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "hosts.yaml")
	noEnv := func(string) (string, bool) { return "", false }
	check := func(src string) (error, string) {
		os.WriteFile(cfg, []byte(src), 0o644)
		var out, errOut bytes.Buffer
		err := run(context.Background(), []string{"-check-config", cfg, "-workspace", t.TempDir()}, noEnv, nil, &out, &errOut)
		return err, errOut.String()
	}
	const provider = "consult:\n  providers: {openai: {base_url: \"https://api.openai.com/v1\", model: m}}\n"
	if err, out := check("http:\n  hosts: {api.openai.com: {rate: {per_second: 1}}}\n" + provider); err != nil {
		t.Errorf("a host only a provider calls: %v\n%s", err, out)
	}
	err, out := check("http:\n  hosts: {api.openai.co: {rate: {per_second: 1}}}\n" + provider)
	if err == nil || !strings.Contains(out, "http.hosts.api.openai.co: no HTTP tool calls this host (hosts: api.openai.com)") {
		t.Errorf("a host nobody calls: %v\n%s", err, out)
	}
}

// TestKnownLimitsReachTheBuckets: the limits the configuration gives tools
// that join later (a category's, an upstream server's and its tools') are
// bucket edges from the start, so their "above target" is exact too.
func TestKnownLimitsReachTheBuckets(t *testing.T) {
	cfg := config.Default()
	cfg.Categories = map[string]config.Limits{"mcp": {Target: 1700 * time.Millisecond}}
	cfg.MCP.Servers = []upstream.Config{{Name: "up", Limits: tools.LimitsConfig{Max: 2300 * time.Millisecond},
		ToolLimits: map[string]tools.LimitsConfig{"slow": {Target: 4200 * time.Millisecond, Max: 6 * time.Second, Timeout: 8 * time.Second}}}}
	b := metrics.Buckets(nil, knownLimits(cfg, registryOptions(cfg))...)
	for _, want := range []float64{1.7, 2.3, 4.2, 6, 8} {
		if !slices.Contains(b, want) {
			t.Errorf("buckets %v lack %v", b, want)
		}
	}
}
