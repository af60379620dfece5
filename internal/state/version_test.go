package state

import "testing"

// TestServerVersion: which nats-server versions toold refuses (before
// 2.12) and which it leaves to the stream's own check (unreadable).
func TestServerVersion(t *testing.T) {
	for _, tt := range []struct {
		v       string
		ok, old bool
	}{
		{"2.10.29", true, true},
		{"2.11.17", true, true},
		{"v2.11.0", true, true},
		{"1.99.0", true, true},
		{"2.12.0", true, false},
		{"2.12.0-RC.1", true, false},
		{"2.15.2", true, false},
		{"3.0.0", true, false},
		{"2.12.1+build.7", true, false},
		{"", false, false},
		{"2.12", false, false},
		{"two.twelve.zero", false, false},
		{"2.-1.0", false, false},
	} {
		got, ok := parseVersion(tt.v)
		if ok != tt.ok || ok && older(got, minServer) != tt.old {
			t.Errorf("%q: parsed %v %v, older than 2.12: %v; want parsed %v, older %v", tt.v, got, ok, older(got, minServer), tt.ok, tt.old)
		}
	}
}
