package launch

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// A reader of Seatbelt's profile language (SBPL), strict enough that a
// profile it accepts would parse in sandbox-exec as far as what toold
// writes goes: balanced forms, strings and regular expressions closed,
// (version 1) first, then allow and deny rules of known operations whose
// filters are known and take what they take (a path filter a string or a
// parameter, a network address "*" or "localhost" with a port). It cannot
// say what a Mac would make of a rule; TestSeatbeltProfiles runs every
// generated profile through it, and TestSBPLReaderRefuses shows it fails
// on each way a profile breaks.

// sbplNode is a form: an atom (a symbol, a "string", a #"regex" or a
// number) or a list.
type sbplNode struct {
	atom   string
	kind   byte // 'y' symbol, 's' string, 'r' regex, 'n' number, 'l' list
	list   []sbplNode
	offset int
}

// sbplOperations are the operations the reader knows (Apple's names).
var sbplOperations = []string{
	"default", "process-exec", "process-exec*", "process-fork", "process-info*", "signal", "sysctl-read", "sysctl-write",
	"mach-lookup", "mach-register", "user-preference-read", "ipc-posix-sem", "ipc-posix-shm", "iokit-open",
	"iokit-get-properties", "file*", "file-read*", "file-read-data", "file-read-metadata", "file-read-xattr", "file-write*",
	"file-write-data", "file-write-create", "file-write-unlink", "file-ioctl", "file-map-executable", "file-link",
	"file-clone", "system-socket", "network*", "network-outbound", "network-inbound", "network-bind", "pseudo-tty",
}

// readSBPL parses and checks a profile, returning the parameters it names.
func readSBPL(src string) ([]string, error) {
	forms, err := sbplParse(src)
	if err != nil {
		return nil, err
	}
	if len(forms) == 0 || !forms[0].is("version") || len(forms[0].list) != 2 || forms[0].list[1].atom != "1" {
		return nil, errors.New("the profile does not start with (version 1)")
	}
	var params []string
	for _, f := range forms[1:] {
		if f.kind != 'l' || len(f.list) < 2 || !(f.is("allow") || f.is("deny")) {
			return nil, fmt.Errorf("at %d: a top-level form is not (allow …) or (deny …)", f.offset)
		}
		i := 1
		for ; i < len(f.list) && f.list[i].kind == 'y'; i++ {
			if !slices.Contains(sbplOperations, f.list[i].atom) {
				return nil, fmt.Errorf("at %d: unknown operation %q", f.list[i].offset, f.list[i].atom)
			}
		}
		if i == 1 {
			return nil, fmt.Errorf("at %d: a rule without an operation", f.offset)
		}
		for _, flt := range f.list[i:] {
			if err := sbplFilter(flt, &params); err != nil {
				return nil, err
			}
		}
	}
	return params, nil
}

func (n sbplNode) is(head string) bool {
	return n.kind == 'l' && len(n.list) > 0 && n.list[0].kind == 'y' && n.list[0].atom == head
}

// sbplFilter checks one filter and collects the parameters it names.
func sbplFilter(n sbplNode, params *[]string) error {
	if n.kind != 'l' || len(n.list) == 0 || n.list[0].kind != 'y' {
		return fmt.Errorf("at %d: a filter must be a list with a name", n.offset)
	}
	head, args := n.list[0].atom, n.list[1:]
	fail := func(why string) error { return fmt.Errorf("at %d: (%s …): %s", n.offset, head, why) }
	one := func(kinds string) (sbplNode, error) {
		if len(args) != 1 || !strings.ContainsRune(kinds, rune(args[0].kind)) {
			return sbplNode{}, fail("takes one argument of kind " + kinds)
		}
		return args[0], nil
	}
	switch head {
	case "literal", "subpath", "prefix", "path-literal":
		a, err := one("sl")
		if err != nil {
			return err
		}
		if a.kind == 'l' {
			if !a.is("param") || len(a.list) != 2 || a.list[1].kind != 's' {
				return fail(`takes a string or (param "NAME")`)
			}
			*params = append(*params, a.list[1].atom)
		} else if !strings.HasPrefix(a.atom, "/") {
			return fail("a path must be absolute")
		}
	case "regex":
		_, err := one("rs")
		return err
	case "require-all", "require-any":
		if len(args) == 0 {
			return fail("needs filters")
		}
		for _, a := range args {
			if err := sbplFilter(a, params); err != nil {
				return err
			}
		}
	case "require-not":
		if len(args) != 1 {
			return fail("takes one filter")
		}
		return sbplFilter(args[0], params)
	case "vnode-type":
		a, err := one("y")
		if err == nil && !slices.Contains([]string{"DIRECTORY", "SYMLINK", "REGULAR-FILE", "CHARACTER-DEVICE", "BLOCK-DEVICE", "FIFO", "SOCKET"}, a.atom) {
			err = fail("unknown vnode type " + a.atom)
		}
		return err
	case "target":
		a, err := one("y")
		if err == nil && !slices.Contains([]string{"same-sandbox", "self", "children", "parent", "others"}, a.atom) {
			err = fail("unknown target " + a.atom)
		}
		return err
	case "sysctl-name", "sysctl-name-prefix", "global-name", "global-name-prefix", "iokit-registry-entry-class", "iokit-user-client-class":
		_, err := one("s")
		return err
	case "socket-domain":
		a, err := one("y")
		if err == nil && !slices.Contains([]string{"AF_UNIX", "AF_INET", "AF_INET6", "AF_SYSTEM", "AF_ROUTE"}, a.atom) {
			err = fail("unknown domain " + a.atom)
		}
		return err
	case "socket-protocol":
		_, err := one("n")
		return err
	case "remote", "local":
		if len(args) == 0 || args[0].kind != 'y' {
			return fail("takes ip, tcp, udp or unix-socket")
		}
		switch args[0].atom {
		case "ip", "tcp", "udp":
			if len(args) > 2 || (len(args) == 2 && args[1].kind != 's') {
				return fail("takes one \"host:port\"")
			}
			if len(args) == 2 {
				return sbplAddress(args[1].atom, fail)
			}
		case "unix-socket":
			if len(args) > 2 {
				return fail("unix-socket takes one path filter")
			}
			if len(args) == 2 {
				f := args[1]
				if !(f.is("literal") || f.is("subpath") || f.is("path-literal") || f.is("regex") || f.is("prefix")) {
					return fail("unix-socket takes a path filter")
				}
				return sbplFilter(f, params)
			}
		default:
			return fail("unknown address kind " + args[0].atom)
		}
	default:
		return fail("unknown filter")
	}
	return nil
}

// sbplAddress checks "host:port": Seatbelt takes "*" or "localhost" for
// the host (sandbox-exec: "host must be * or localhost in network
// address"), "*" or a port number.
func sbplAddress(a string, fail func(string) error) error {
	host, port, ok := strings.Cut(a, ":")
	if !ok || (host != "*" && host != "localhost") {
		return fail("host must be * or localhost in " + strconv.Quote(a))
	}
	if port == "*" {
		return nil
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fail("port must be * or 1-65535 in " + strconv.Quote(a))
	}
	return nil
}

// sbplParse reads the forms of src.
func sbplParse(src string) ([]sbplNode, error) {
	var stack [][]sbplNode
	var starts []int
	var top []sbplNode
	push := func(n sbplNode) {
		if len(stack) == 0 {
			top = append(top, n)
		} else {
			stack[len(stack)-1] = append(stack[len(stack)-1], n)
		}
	}
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == ';':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '(':
			stack, starts = append(stack, nil), append(starts, i)
			i++
		case c == ')':
			if len(stack) == 0 {
				return nil, fmt.Errorf("at %d: a ) closes nothing", i)
			}
			n := sbplNode{kind: 'l', list: stack[len(stack)-1], offset: starts[len(starts)-1]}
			stack, starts = stack[:len(stack)-1], starts[:len(starts)-1]
			push(n)
			i++
		case c == '"' || (c == '#' && i+1 < len(src) && src[i+1] == '"'):
			kind, at := byte('s'), i
			if c == '#' {
				kind, i = 'r', i+1
			}
			var b strings.Builder
			i++
			for ; i < len(src) && src[i] != '"'; i++ {
				if src[i] == '\\' && kind == 's' {
					i++
					if i == len(src) {
						break
					}
				}
				b.WriteByte(src[i])
			}
			if i >= len(src) {
				return nil, fmt.Errorf("at %d: a string is not closed", at)
			}
			i++
			push(sbplNode{atom: b.String(), kind: kind, offset: at})
		default:
			at := i
			for i < len(src) && !strings.ContainsRune(" \t\r\n();\"", rune(src[i])) {
				i++
			}
			word := src[at:i]
			kind := byte('y')
			if _, err := strconv.Atoi(word); err == nil {
				kind = 'n'
			} else if strings.ContainsAny(word, "#'`,") {
				return nil, fmt.Errorf("at %d: %q is no symbol", at, word)
			}
			push(sbplNode{atom: word, kind: kind, offset: at})
		}
	}
	if len(stack) > 0 {
		return nil, fmt.Errorf("at %d: a ( is not closed", starts[len(starts)-1])
	}
	return top, nil
}

// TestSBPLReaderRefuses: the reader fails each way a profile breaks, and
// passes a profile toold makes.
func TestSBPLReaderRefuses(t *testing.T) {
	good, _ := seatbeltProfile(seatbeltPolicy{Workspace: "/w", Tmp: "/t", Network: true, Ports: []int{8080},
		Sockets: []string{"/s"}, ReadOnly: []string{"/r"}, Program: "/p", Private: []string{"/o"}})
	params, err := readSBPL(good)
	if err != nil {
		t.Fatalf("a profile toold makes: %v", err)
	}
	if want := []string{"WORKSPACE", "TMPDIR", "READ_ONLY_0", "PROGRAM", "TMPDIR", "WORKSPACE", "TMPDIR", "TMPDIR",
		"UNIX_SOCKET_0", "TOOLD_0"}; !slices.Equal(params, want) {
		t.Errorf("parameters %v, want %v", params, want)
	}
	for name, bad := range map[string]string{
		"unbalanced":             good + "(allow file-read*",
		"closes nothing":         good + ")",
		"string not closed":      "(version 1)\n(allow file-read* (literal \"/x))",
		"regex not closed":       "(version 1)\n(deny file-write* (regex #\"^/x))",
		"no version":             "(deny default)",
		"version 2":              "(version 2)\n(deny default)",
		"unknown operation":      "(version 1)\n(allow file-reed* (subpath \"/x\"))",
		"no operation":           "(version 1)\n(allow (subpath \"/x\"))",
		"unknown filter":         "(version 1)\n(allow file-read* (subpth \"/x\"))",
		"relative path":          "(version 1)\n(allow file-read* (subpath \"x\"))",
		"param misused":          "(version 1)\n(allow file-read* (subpath (param)))",
		"address host":           "(version 1)\n(deny network-outbound (remote ip \"127.0.0.1:8080\"))",
		"address port":           "(version 1)\n(deny network-outbound (remote ip \"*:70000\"))",
		"address kind":           "(version 1)\n(deny network-outbound (remote sctp \"*:1\"))",
		"vnode type":             "(version 1)\n(allow file-read-metadata (vnode-type FOLDER))",
		"top-level not a rule":   "(version 1)\n(import \"system.sb\")",
		"unix socket not a path": "(version 1)\n(allow network-outbound (remote unix-socket (global-name \"x\")))",
		"stray quote":            "(version 1)\n(allow file-read* 'x)",
	} {
		if _, err := readSBPL(bad); err == nil {
			t.Errorf("%s: accepted:\n%s", name, bad)
		}
	}
}

// FuzzSBPLReader: the reader never panics, and what it accepts re-reads
// the same after a comment is added (it ignores comments, nothing else).
func FuzzSBPLReader(f *testing.F) {
	good, _ := seatbeltProfile(seatbeltPolicy{Workspace: "/w", Tmp: "/t", Network: true, Ports: []int{1}})
	f.Add(good)
	f.Add("(version 1)\n(deny default)")
	f.Fuzz(func(t *testing.T, src string) {
		p, err := readSBPL(src)
		if err != nil {
			return
		}
		q, err := readSBPL(src + "\n; comment")
		if err != nil || !slices.Equal(p, q) {
			t.Errorf("a comment changed the reading: %v %v", err, q)
		}
	})
}
