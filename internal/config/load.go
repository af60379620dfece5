package config

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	suggestpkg "github.com/toold/toold/internal/suggest"
)

// Problem is one thing wrong with a configuration.
type Problem struct {
	// Path names the setting, as "tools.read_file.limits.timeout".
	Path    string
	Message string
}

// Error lists every problem found.
type Error struct {
	Problems []Problem
}

func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.Path + ": " + p.Message
	}
	return strings.Join(lines, "\n")
}

func (e *Error) add(path, format string, args ...any) {
	if path == "" {
		path = "(top)"
	}
	e.Problems = append(e.Problems, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

func (e *Error) orNil() error {
	if len(e.Problems) == 0 {
		return nil
	}
	slices.SortStableFunc(e.Problems, func(a, b Problem) int { return strings.Compare(a.Path, b.Path) })
	return e
}

// Load reads the file at path on top of the built-in defaults, expanding
// ${VAR} from the environment, and validates the result.
func Load(path string, lookupEnv func(string) (string, bool)) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{Problems: []Problem{{Path: path, Message: err.Error()}}}
	}
	c, err := parse(data, lookupEnv, Default())
	if err != nil {
		return nil, err
	}
	return c, c.Validate()
}

// parse decodes data on top of base.
func parse(data []byte, lookupEnv func(string) (string, bool), base *Config) (*Config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, &Error{Problems: []Problem{{Path: "(file)", Message: err.Error()}}}
	}
	if doc.Kind == 0 { // empty file: the defaults
		return base, nil
	}
	probs := &Error{}
	lines := map[int]string{}
	walk(doc.Content[0], reflect.TypeFor[Config](), "", probs, lines, lookupEnv)
	if len(probs.Problems) > 0 {
		return nil, probs.orNil()
	}
	if err := doc.Decode(base); err != nil {
		if te, ok := err.(*yaml.TypeError); ok {
			for _, msg := range te.Errors {
				probs.add(pathOfLine(msg, lines), "%s", msg)
			}
			return nil, probs.orNil()
		}
		return nil, &Error{Problems: []Problem{{Path: "(file)", Message: err.Error()}}}
	}
	return base, nil
}

var lineRE = regexp.MustCompile(`^line (\d+): `)

func pathOfLine(msg string, lines map[int]string) string {
	if m := lineRE.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		if p, ok := lines[n]; ok {
			return p
		}
	}
	return "(file)"
}

// walk checks the node tree against the Go type: it refuses unknown keys
// (with a suggestion), expands ${VAR} in scalar values, and records which
// setting each line holds so decoder errors can name a path.
func walk(n *yaml.Node, t reflect.Type, path string, probs *Error, lines map[int]string, env func(string) (string, bool)) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	lines[n.Line] = path
	switch n.Kind {
	case yaml.ScalarNode:
		if !strings.Contains(n.Value, "$") {
			return
		}
		v, err := expand(n.Value, env)
		if err != nil {
			probs.add(path, "%v", err)
		}
		n.Value = v
		if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) == 0 {
			n.Tag = "" // resolve again: ${PORT} may expand to a number
		}
	case yaml.MappingNode:
		if t.Kind() == reflect.Slice && reflect.PointerTo(t).Implements(yamlUnmarshaler) {
			t = t.Elem() // one item written as a mapping (auth.oauth)
		}
		walkMapping(n, t, path, probs, lines, env)
	case yaml.SequenceNode:
		if t.Kind() != reflect.Slice {
			return // the decoder reports the type mismatch
		}
		for i, item := range n.Content {
			walk(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i), probs, lines, env)
		}
	case yaml.AliasNode:
		probs.add(path, "YAML aliases are not supported in toold configs")
	}
}

func walkMapping(n *yaml.Node, t reflect.Type, path string, probs *Error, lines map[int]string, env func(string) (string, bool)) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i].Value, n.Content[i+1]
		sub := key
		if path != "" {
			sub = path + "." + key
		}
		lines[n.Content[i].Line] = sub
		switch t.Kind() {
		case reflect.Map:
			walk(val, t.Elem(), sub, probs, lines, env)
		case reflect.Struct:
			f, ok := fieldByTag(t, key)
			if !ok {
				probs.add(sub, "unknown key%s", suggest(key, t))
				continue
			}
			walk(val, f.Type, sub, probs, lines, env)
		}
	}
}

func fieldByTag(t reflect.Type, key string) (reflect.StructField, bool) {
	for _, f := range keyFields(t) {
		if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// keyFields are the fields of a struct that are keys of its mapping: its
// own, and those of the structs it embeds with `yaml:",inline"` (one
// declaration of keys several sections share, as launch.Sandbox).
func keyFields(t reflect.Type) []reflect.StructField {
	var out []reflect.StructField
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue // no key (launch.Network's own state)
		}
		if name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ","); name == "" && opts == "inline" && f.Type.Kind() == reflect.Struct {
			out = append(out, keyFields(f.Type)...)
			continue
		}
		out = append(out, f)
	}
	return out
}

// suggest names the closest known key, when one is close.
func suggest(key string, t reflect.Type) string {
	var known []string
	for _, f := range keyFields(t) {
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		known = append(known, name)
	}
	if best := suggestpkg.Closest(key, known, 2); best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return " (known keys: " + strings.Join(known, ", ") + ")"
}

// expand replaces ${VAR} and ${VAR:-default} with the environment's value;
// "$$" is a literal "$"; ${user:name} stays as written (the caller's own
// credential, resolved per call). An unset variable without a default is an error, so
// a missing secret fails at start rather than becoming an empty key.
// Expansion happens on parsed values, so a variable's content can never add
// YAML structure.
func expand(s string, env func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		if s[i+1] == '$' {
			b.WriteByte('$')
			i++
			continue
		}
		if s[i+1] != '{' {
			b.WriteByte('$')
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return s, fmt.Errorf("unterminated ${ in %q", s)
		}
		if strings.HasPrefix(s[i:], "${user:") {
			// The caller's own credential: kept as written, resolved per
			// call (internal/credentials), never from the environment.
			b.WriteString(s[i : i+end+1])
			i += end
			continue
		}
		name, def, hasDef := strings.Cut(s[i+2:i+end], ":-")
		if !envName.MatchString(name) {
			return s, fmt.Errorf("%q is not an environment variable name", name)
		}
		v, ok := env(name)
		switch {
		case ok && v != "":
			b.WriteString(v)
		case hasDef:
			b.WriteString(def)
		case ok:
		default:
			return s, fmt.Errorf("environment variable %s is not set (use ${%s:-default} for a default)", name, name)
		}
		i += end
	}
	return b.String(), nil
}

// yamlUnmarshaler is implemented by list types that also accept one item
// written as a mapping.
var yamlUnmarshaler = reflect.TypeFor[yaml.Unmarshaler]()

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
