package state_test

import (
	"regexp"
	"testing"

	"github.com/toold/toold/internal/ospath"
	"github.com/toold/toold/internal/state"
)

// TestDefaultDirEveryPlatform: the state directory follows each
// platform's convention (~/Library/Application Support/toold on macOS,
// %LOCALAPPDATA%\toold on Windows), run here with each platform's rules;
// where the file system ignores case, two spellings of one workspace find
// one store.
func TestDefaultDirEveryPlatform(t *testing.T) {
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	for _, c := range []struct {
		plat           ospath.Platform
		env            map[string]string
		ws, same, want string // want: the directory's pattern
	}{
		{ospath.Darwin, map[string]string{"HOME": "/Users/me"}, "/Users/me/src/Project", "/users/me/SRC/project",
			`^/Users/me/Library/Application Support/toold/Project-[0-9a-f]{12}$`},
		{ospath.Windows, map[string]string{"LOCALAPPDATA": `C:\Users\me\AppData\Local`}, `C:\Users\me\src\Project`, `c:\users\me\src\PROJECT`,
			`^C:\\Users\\me\\AppData\\Local\\toold\\Project-[0-9a-f]{12}$`},
		{ospath.Linux, map[string]string{"HOME": "/home/me"}, "/home/me/src/project", "",
			`^/home/me/\.local/state/toold/project-[0-9a-f]{12}$`},
	} {
		got, err := state.DefaultDirFor(c.plat, env(c.env), c.ws)
		if err != nil || !regexp.MustCompile(c.want).MatchString(got) {
			t.Errorf("%s: %q %v, want %s", c.plat.OS, got, err, c.want)
			continue
		}
		if c.same == "" {
			continue
		}
		if again, _ := state.DefaultDirFor(c.plat, env(c.env), c.same); again[len(again)-12:] != got[len(got)-12:] {
			t.Errorf("%s: %s and %s are one workspace but get %s and %s", c.plat.OS, c.ws, c.same, got, again)
		}
	}
	linuxA, _ := state.DefaultDirFor(ospath.Linux, env(map[string]string{"HOME": "/h"}), "/w/Project")
	linuxB, _ := state.DefaultDirFor(ospath.Linux, env(map[string]string{"HOME": "/h"}), "/w/project")
	if linuxA[len(linuxA)-12:] == linuxB[len(linuxB)-12:] {
		t.Error("on Linux, /w/Project and /w/project are two workspaces but share a store")
	}
}
