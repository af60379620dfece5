//go:build linux || darwin

package launch

import (
	"fmt"
	"os"
)

// DefaultPath is a program's PATH unless its sandbox sets one.
const DefaultPath = "/usr/local/bin:/usr/bin:/bin"

// candidates are the files a bare name may be in a directory: itself.
func candidates(p string) []string { return []string{p} }

// executable says why p cannot be run, if it cannot: it must be a file
// with an execute bit.
func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("program %s: %w", p, err)
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("program %s is not executable", p)
	}
	return nil
}
