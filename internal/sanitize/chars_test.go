package sanitize

import "testing"

// The SWAR helpers must agree with the byte tables for every byte value
// in every lane.
func TestSWARHelpers(t *testing.T) {
	for c := 0; c < 256; c++ {
		for lane := 0; lane < 8; lane++ {
			x := uint64(c) << (8 * lane)
			fill := uint64(0x41) * (ones &^ (0xff << (8 * lane))) // 'A' elsewhere
			x |= fill
			digit := c >= '0' && c <= '9'
			if got := hasDigit(x) != 0; got != digit {
				t.Errorf("hasDigit(byte %#x, lane %d) = %v", c, lane, got)
			}
			ctl := c < 0x20 || c == 0x7f || c >= 0x80
			if got := hasControlOrHigh(x) != 0; got != ctl {
				t.Errorf("hasControlOrHigh(byte %#x, lane %d) = %v", c, lane, got)
			}
		}
	}
}
