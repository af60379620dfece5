// Package cgroups reads where this process's control groups are: the lines
// of /proc/self/cgroup and the cgroup mounts of /proc/self/mountinfo, on
// cgroup v2, v1 and hybrid hosts. The command tools' per-run cgroups and
// toold's memory limit (cmd/toold's GC tuning) both start from here.
package cgroups

import (
	"bufio"
	"bytes"
	"path"
	"strconv"
	"strings"
)

// Group is a line of /proc/self/cgroup: the unified hierarchy ("0::/p",
// V2) or a v1 hierarchy with its controllers ("4:memory:/p").
type Group struct {
	V2          bool
	Controllers string // comma-separated, as the line gives them; "" for v2
	Path        string // cleaned, absolute
}

// Has reports whether the v1 hierarchy carries controller c.
func (g Group) Has(c string) bool { return hasOption(g.Controllers, c) }

// ParseGroups reads the lines of /proc/self/cgroup; malformed ones and
// paths that are not absolute are left out.
func ParseGroups(b []byte) []Group {
	var out []Group
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		id, rest, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok {
			continue
		}
		controllers, p, ok := strings.Cut(rest, ":")
		if !ok || !strings.HasPrefix(p, "/") {
			continue
		}
		out = append(out, Group{V2: id == "0" && controllers == "", Controllers: controllers, Path: path.Clean(p)})
	}
	return out
}

// Mount is a cgroup mount of /proc/self/mountinfo.
type Mount struct {
	Root, Point string // the hierarchy's directory shown, and where
	V2          bool   // cgroup2, else a v1 hierarchy
	Options     string // the super options: a v1 hierarchy's controllers among them
}

// Has reports whether the v1 hierarchy carries controller c.
func (m Mount) Has(c string) bool { return hasOption(m.Options, c) }

// ParseMounts reads the cgroup and cgroup2 mounts of /proc/self/mountinfo,
// in order.
func ParseMounts(mountinfo []byte) []Mount {
	var out []Mount
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	for sc.Scan() {
		// ID parent major:minor root point options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		a, b := strings.Fields(pre), strings.Fields(post)
		if len(a) < 5 || len(b) < 3 || (b[0] != "cgroup" && b[0] != "cgroup2") {
			continue
		}
		out = append(out, Mount{Root: unescape(a[3]), Point: unescape(a[4]), V2: b[0] == "cgroup2", Options: b[2]})
	}
	return out
}

// Dirs yields the directories of cgroup p and of its ancestors, as far up
// as this mount shows them, the deepest first. A path outside the mount's
// root (a cgroup namespace's view can be) yields the mount point alone.
func (m Mount) Dirs(p string) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		rel, ok := strings.CutPrefix(p, m.Root)
		if !ok || (rel != "" && !strings.HasPrefix(rel, "/") && m.Root != "/") {
			rel = ""
		}
		rel = path.Clean("/" + rel)
		for {
			if !yield(path.Join(m.Point, rel)) || rel == "/" {
				return
			}
			rel = path.Dir(rel)
		}
	}
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func hasOption(list, opt string) bool {
	for o := range strings.SplitSeq(list, ",") {
		if o == opt {
			return true
		}
	}
	return false
}
