package command

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/toold/toold/internal/tools"
)

// execute_command checks a caller's options against the program's
// allow-list by parsing the arguments as the program will: with GNU
// getopt_long's rules (glibc, POSIXLY_CORRECT unset), which GNU grep,
// find's friends, git's parse-options and most Linux tools follow. An
// allow-list that does not know which options take a value is bypassed:
// `grep -e -- --version` lets "--" pass as -e's value, and the program
// then reads --version as an option. So every allowed option says whether
// it takes a value, and the parse follows getopt_long exactly:
//
//   - "--" ends the options; everything after it is an operand.
//   - "--name" matches a long option exactly, or as an abbreviation (a
//     prefix of exactly one allowed long option; a prefix of several is
//     refused as ambiguous). "--name=VALUE" attaches a value.
//   - A required value is the rest of the word (-eVAL, --opt=VAL), or else
//     the next word, whatever it is ("--", "-f", "--version"): it is a
//     value, never read as an option.
//   - An optional value is only ever attached (-cVAL, --color=VAL).
//   - "-abc" is a cluster of short options; the first that takes a value
//     takes the rest of the word, or the next word.
//   - "-" and words not starting with "-" are operands, and options may
//     follow them (permutation), until "--".
//
// Programs with single-dash long options (find -name, Go's flag package:
// -count=1, -run X) list them as "-name VALUE": such a word is matched
// exactly, before it would be read as a cluster, like getopt_long_only.
//
// The checked arguments are rebuilt canonically: each option by its full
// declared name (so the program never meets an abbreviation its own,
// larger, table might resolve to another option), short options one per
// word with a required value as the next word, then "--" (when the
// program understands it) and the operands.

// optSpec is one allowed option.
type optSpec struct {
	name   string   // "-e", "--regexp" or "-name"
	dash   bool     // a single-dash long option: "-name", or "-v[=BOOL]"
	takes  takes    // whether it takes a value
	values []string // when set, the only values allowed
}

type takes int

const (
	takesNone takes = iota
	takesValue
	takesOptional
)

// optTable is a program's compiled allow-list.
type optTable struct {
	any      bool // "*": every option, unparsed
	short    map[byte]optSpec
	long     []optSpec          // in declaration order
	dashLong map[string]optSpec // "-name": single-dash long options (find, Go's flag package)
}

// namePattern and valuePattern are the two halves of an allow-list entry:
// the option, then how it takes a value: " VALUE" or "=VALUE" (required),
// "[VALUE]" or "[=VALUE]" (optional, attached), a bare "=" (required, the
// older form). VALUE is a placeholder in capitals, or {a,b,c}: the only
// values allowed.
var (
	namePattern  = regexp.MustCompile(`^(--?[A-Za-z0-9?][A-Za-z0-9_.-]*)(.*)$`)
	valuePattern = regexp.MustCompile(`^(?:(=)|( |=)([A-Z][A-Z0-9_]*|\{[^{}]*\})|\[(=?)([A-Z][A-Z0-9_]*|\{[^{}]*\})\])?$`)
)

// compileOptions parses a rule's options.
func compileOptions(list []string) (*optTable, error) {
	t := &optTable{short: map[byte]optSpec{}, dashLong: map[string]optSpec{}}
	seen := map[string]bool{}
	for _, s := range list {
		if s == "*" {
			t.any = true
			continue
		}
		o, err := compileOption(s)
		if err != nil {
			return nil, err
		}
		if seen[o.name] {
			return nil, fmt.Errorf("option %s is listed twice", o.name)
		}
		seen[o.name] = true
		switch {
		case o.dash:
			t.dashLong[o.name[1:]] = o
		case strings.HasPrefix(o.name, "--"):
			t.long = append(t.long, o)
		default:
			t.short[o.name[1]] = o
		}
	}
	return t, nil
}

func compileOption(s string) (optSpec, error) {
	bad := func(why string) (optSpec, error) {
		return optSpec{}, fmt.Errorf("option %q: %s; write -x, \"-x VALUE\", -x[VALUE], --name, --name=VALUE, --name[=VALUE], "+
			"-name VALUE (single-dash long options), or a value set like --color={auto,never}", s, why)
	}
	n := namePattern.FindStringSubmatch(s)
	if n == nil {
		return bad("not an option")
	}
	m := valuePattern.FindStringSubmatch(n[2])
	if m == nil {
		return bad("cannot read how it takes a value")
	}
	o := optSpec{name: n[1]}
	kind := "short"
	switch {
	case strings.HasPrefix(o.name, "--"):
		kind = "long"
	case len(o.name) > 2:
		kind = "dash"
	}
	placeholder := ""
	switch {
	case m[1] == "=":
		o.takes = takesValue
		if kind == "short" {
			return bad("a short option's value is written \"-x VALUE\"")
		}
	case m[2] != "":
		o.takes, placeholder = takesValue, m[3]
		if kind == "short" && m[2] == "=" || kind == "long" && m[2] == " " {
			return bad("a short option's value is written \"-x VALUE\", a long option's --name=VALUE")
		}
	case m[5] != "":
		o.takes, placeholder = takesOptional, m[5]
		if kind == "short" && m[4] == "=" {
			kind = "dash" // Go's flag package: -v, -v=false
		} else if kind == "long" && m[4] != "=" || kind == "dash" && m[4] != "=" {
			return bad("an optional value is written -x[VALUE], --name[=VALUE] or -name[=VALUE]")
		}
	}
	o.dash = kind == "dash"
	if strings.HasPrefix(placeholder, "{") {
		o.values = strings.Split(strings.Trim(placeholder, "{}"), ",")
	}
	return o, nil
}

// parsedOpt is an option found in the arguments, with its value.
type parsedOpt struct {
	spec     optSpec
	value    string
	hasValue bool
}

// parse splits args into options and operands with getopt_long's rules,
// checking each option against the table. Its errors name the argument
// and say what is allowed.
func (t *optTable) parse(prog string, args []string) (opts []parsedOpt, operands []string, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return opts, append(operands, args[i+1:]...), nil
		case strings.HasPrefix(a, "--"):
			o, used, err := t.parseLong(prog, a, args[i+1:])
			if err != nil {
				return nil, nil, err
			}
			opts, i = append(opts, o), i+used
		case strings.HasPrefix(a, "-") && a != "-":
			if o, used, ok, err := t.parseDashLong(prog, a, args[i+1:]); ok || err != nil {
				if err != nil {
					return nil, nil, err
				}
				opts, i = append(opts, o), i+used
				continue
			}
			os, used, err := t.parseShort(prog, a, args[i+1:])
			if err != nil {
				return nil, nil, err
			}
			opts, i = append(opts, os...), i+used
		default:
			operands = append(operands, a)
		}
	}
	return opts, operands, nil
}

// parseLong parses "--name[=value]"; used counts the following words it
// took as its value.
func (t *optTable) parseLong(prog, a string, rest []string) (o parsedOpt, used int, err error) {
	name, value, hasEq := strings.Cut(a[2:], "=")
	spec, err := t.findLong(prog, a, name)
	if err != nil {
		return o, 0, err
	}
	return longValue(prog, a, spec, value, hasEq, rest)
}

// parseDashLong parses "-name[=value]" when name is a single-dash long
// option of the table, matched exactly (programs with such options, find
// or Go's flag package, do not abbreviate them); ok is false for any
// other word, which is then a cluster of short options.
func (t *optTable) parseDashLong(prog, a string, rest []string) (o parsedOpt, used int, ok bool, err error) {
	if len(t.dashLong) == 0 {
		return o, 0, false, nil
	}
	name, value, hasEq := strings.Cut(a[1:], "=")
	spec, found := t.dashLong[name]
	if !found {
		return o, 0, false, nil
	}
	o, used, err = longValue(prog, a, spec, value, hasEq, rest)
	return o, used, true, err
}

// longValue takes a long option's value: attached after "=", or (when
// required) the next word.
func longValue(prog, a string, spec optSpec, value string, hasEq bool, rest []string) (o parsedOpt, used int, err error) {
	o = parsedOpt{spec: spec}
	switch spec.takes {
	case takesNone:
		if hasEq {
			return o, 0, optError(prog, a, "%s takes no value", spec.name)
		}
	case takesOptional:
		o.value, o.hasValue = value, hasEq
	case takesValue:
		switch {
		case hasEq:
			o.value = value
		case len(rest) > 0:
			o.value, used = rest[0], 1
		default:
			return o, 0, optError(prog, a, "%s needs a value", spec.name)
		}
		o.hasValue = true
	}
	return o, used, checkValue(prog, o)
}

// findLong resolves a long option's name as getopt_long does: an exact
// match, else the one option it abbreviates. Where glibc would take the
// first of several options with the same kind of value, toold refuses:
// the program's own table may resolve the word otherwise.
func (t *optTable) findLong(prog, a, name string) (optSpec, error) {
	var found []optSpec
	for _, o := range t.long {
		switch {
		case o.name[2:] == name:
			return o, nil
		case strings.HasPrefix(o.name[2:], name):
			found = append(found, o)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return optSpec{}, optError(prog, a, "option --%s is not allowed", name)
	}
	names := make([]string, len(found))
	for i, o := range found {
		names[i] = o.name
	}
	return optSpec{}, optError(prog, a, "--%s is ambiguous: it abbreviates %s; write the option in full", name, strings.Join(names, ", "))
}

// parseShort parses a cluster "-abc"; used counts the following words its
// last option took as its value.
func (t *optTable) parseShort(prog, a string, rest []string) (opts []parsedOpt, used int, err error) {
	for j := 1; j < len(a); j++ {
		spec, ok := t.short[a[j]]
		if !ok {
			return nil, 0, optError(prog, a, "option -%s is not allowed", showByte(a[j]))
		}
		o := parsedOpt{spec: spec}
		switch spec.takes {
		case takesNone:
			opts = append(opts, o)
			continue
		case takesOptional:
			o.value, o.hasValue = a[j+1:], j+1 < len(a)
		case takesValue:
			switch {
			case j+1 < len(a):
				o.value = a[j+1:]
			case len(rest) > 0:
				o.value, used = rest[0], 1
			default:
				return nil, 0, optError(prog, a, "%s needs a value", spec.name)
			}
			o.hasValue = true
		}
		if err := checkValue(prog, o); err != nil {
			return nil, 0, err
		}
		return append(opts, o), used, nil
	}
	return opts, 0, nil
}

func showByte(b byte) string {
	if b >= 0x21 && b < 0x7f {
		return string(b)
	}
	return fmt.Sprintf("\\x%02x", b)
}

func checkValue(prog string, o parsedOpt) error {
	if o.spec.values == nil || !o.hasValue || slices.Contains(o.spec.values, o.value) {
		return nil
	}
	return tools.NewPermissionError("%s %s: the value %q is not allowed", prog, o.spec.name, o.value).WithCode(tools.CodeOptionNotAllowed).
		WithSuggestion("use one of: %s", strings.Join(o.spec.values, ", "))
}

// words renders a parsed option canonically (see the comment at the top).
// A single-dash long option's required value is the next word, which find
// needs and Go's flag package accepts.
func (o parsedOpt) words() []string {
	long, dash := strings.HasPrefix(o.spec.name, "--"), o.spec.dash
	switch {
	case !o.hasValue:
		return []string{o.spec.name}
	case long, dash && o.spec.takes == takesOptional:
		return []string{o.spec.name + "=" + o.value}
	case o.spec.takes == takesOptional:
		return []string{o.spec.name + o.value}
	}
	return []string{o.spec.name, o.value}
}

func optError(prog, arg, format string, args ...any) *tools.Error {
	return tools.NewPermissionError("%s: argument %q: %s", prog, arg, fmt.Sprintf(format, args...)).WithCode(tools.CodeOptionNotAllowed)
}

// describe lists the allowed options for a suggestion.
func (t *optTable) describe() string {
	var names []string
	for _, o := range t.short {
		names = append(names, o.describe())
	}
	for _, o := range t.long {
		names = append(names, o.describe())
	}
	for _, o := range t.dashLong {
		names = append(names, o.describe())
	}
	if len(names) == 0 {
		return "this program takes no options here"
	}
	slices.Sort(names)
	return "allowed options: " + strings.Join(names, ", ") + " (VALUE: the option takes a value, as the next word or attached: -eVALUE, --name=VALUE; [VALUE]: an optional value, attached only)"
}

func (o optSpec) describe() string {
	v := "VALUE"
	if o.values != nil {
		v = "{" + strings.Join(o.values, ",") + "}"
	}
	long := o.dash || strings.HasPrefix(o.name, "--")
	switch {
	case o.takes == takesNone:
		return o.name
	case o.takes == takesOptional && long:
		return o.name + "[=" + v + "]"
	case o.takes == takesOptional:
		return o.name + "[" + v + "]"
	case strings.HasPrefix(o.name, "--"):
		return o.name + "=" + v
	}
	return o.name + " " + v
}
