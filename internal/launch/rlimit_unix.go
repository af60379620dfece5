//go:build linux || darwin

package launch

import (
	"fmt"
	"strconv"
	"strings"
)

// parseRlimits is encodeShimRlimits read back, strictly: three decimal
// numbers per item, the two limits both plain or both with a "+"
// (relative: the shim adds its uid's processes), nothing else (a malformed
// spec stops the shim before it runs anything).
func parseRlimits(s string) ([]rlimit, error) {
	var out []rlimit
	for _, part := range strings.Split(s, ",") {
		f := strings.Split(part, ":")
		if len(f) != 3 {
			return nil, fmt.Errorf("rlimit %q: want resource:soft:hard", part)
		}
		res, err := strconv.ParseUint(f[0], 10, 31)
		if err != nil {
			return nil, fmt.Errorf("rlimit %q: resource: %w", part, err)
		}
		r := rlimit{resource: int(res)}
		soft, rs := strings.CutPrefix(f[1], "+")
		hard, rh := strings.CutPrefix(f[2], "+")
		if rs != rh {
			return nil, fmt.Errorf("rlimit %q: both limits relative or neither", part)
		}
		r.relative = rs
		if r.cur, err = strconv.ParseUint(soft, 10, 64); err != nil {
			return nil, fmt.Errorf("rlimit %q: soft limit: %w", part, err)
		}
		if r.max, err = strconv.ParseUint(hard, 10, 64); err != nil {
			return nil, fmt.Errorf("rlimit %q: hard limit: %w", part, err)
		}
		out = append(out, r)
	}
	return out, nil
}
