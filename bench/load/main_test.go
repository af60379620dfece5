package main

import (
	"slices"
	"testing"
)

// -skip-executions is -only less executions, whatever -only says.
func TestSelected(t *testing.T) {
	for _, tt := range []struct {
		only string
		skip bool
		want []string
	}{
		{"", true, []string{"peers", "gc", "throughput", "overload", "memory", "mcp", "hosting", "uploads"}},
		{"", false, []string{"peers", "gc", "throughput", "overload", "memory", "executions", "mcp", "hosting", "uploads"}}, // untouched by the one before
		{"throughput,executions", false, []string{"throughput", "executions"}},
		{"throughput,executions", true, []string{"throughput"}},
	} {
		if got := selected(tt.only, tt.skip); !slices.Equal(got, tt.want) {
			t.Errorf("-only %q -skip-executions=%v: %v, want %v", tt.only, tt.skip, got, tt.want)
		}
	}
}
