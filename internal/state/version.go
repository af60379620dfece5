package state

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
)

// minServer is the oldest nats-server toold runs on: 2.12, whose message
// schedules are toold's timers (TOOLD_TIMERS). Per-key TTLs
// (toold_confirmations) need 2.11, so 2.12 covers both.
var minServer = [3]int{2, 12, 0}

// checkServer refuses a NATS server older than minServer before anything
// is created on it, naming its version and what to run. It sees the
// server this connection reached; another server of a cluster still too
// old is found when TOOLD_TIMERS comes back without schedules (provision).
// A version it cannot read is left to that check.
func checkServer(nc *nats.Conn) error {
	v := nc.ConnectedServerVersion()
	got, ok := parseVersion(v)
	if !ok || !older(got, minServer) {
		return nil
	}
	return fmt.Errorf("the NATS server %s runs nats-server %s; toold needs %d.%d or later on every server of the cluster "+
		"(its timers are messages the server schedules): upgrade the servers", nc.ConnectedUrlRedacted(), v, minServer[0], minServer[1])
}

// parseVersion reads "major.minor.patch", with or without a leading v and
// a pre-release or build suffix (2.12.0-RC.1 counts as 2.12.0).
func parseVersion(v string) ([3]int, bool) {
	var out [3]int
	v = strings.TrimPrefix(v, "v")
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return out, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return out, false
		}
		out[i] = n
	}
	return out, true
}

// older reports whether a comes before b.
func older(a, b [3]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}
