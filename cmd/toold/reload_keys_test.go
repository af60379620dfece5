package main

import (
	"slices"
	"testing"

	"github.com/toold/toold/internal/config"
	"github.com/toold/toold/internal/tools/upstream"
)

// TestFixedChanges: what a reload applies passes, anything else is named
// down to its key under the top one, so the refusal says what to restart for.
func TestFixedChanges(t *testing.T) {
	tests := []struct {
		name   string
		change func(c *config.Config)
		want   []string
	}{
		{"nothing", func(*config.Config) {}, nil},
		{"a tool enabled", func(c *config.Config) { c.Tools = map[string]config.Tool{"sleep": {}} }, nil},
		{"the keys", func(c *config.Config) { c.Auth.Keys = []config.Key{{Name: "k"}} }, nil},
		{"the hosted servers", func(c *config.Config) { c.MCP.Servers = []upstream.Config{{Name: "x", URL: "http://127.0.0.1:1"}} }, nil},
		{"the listen address", func(c *config.Config) { c.Listen = "127.0.0.1:9999" }, []string{"listen"}},
		{"the admin address", func(c *config.Config) { c.AdminListen = "127.0.0.1:9998" }, []string{"admin_listen"}},
		{"the audit key", func(c *config.Config) { c.State.Audit.SigningKeyFile = "/elsewhere" }, []string{"state.audit"}},
		{"the store", func(c *config.Config) { c.State.NATS.URL = "nats://elsewhere:4222" }, []string{"state.nats"}},
		{"the stdio key beside the servers", func(c *config.Config) { c.MCP.StdioKey = "k" }, []string{"mcp.stdio_key"}},
		{"a key and a listen address", func(c *config.Config) { c.Auth.Keys = []config.Key{{Name: "k"}}; c.Listen = "0.0.0.0:1" }, []string{"listen"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cur, next := config.Default(), config.Default()
			tt.change(next)
			if got := fixedChanges(cur, next); !slices.Equal(got, tt.want) {
				t.Errorf("fixedChanges = %q, want %q", got, tt.want)
			}
		})
	}
}
