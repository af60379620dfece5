// Package docs holds toold's documentation; its tests check that every
// link resolves and that every configuration key the documentation names
// is a key toold reads.
package docs

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/toold/toold/internal/config"
)

// markdown lists the documentation: README.md and docs/*.md.
func markdown(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"../README.md"}, files...)
}

// block is a fenced code block: its language and text.
type block struct {
	lang, text string
	line       int
}

// parse splits a markdown file into its prose lines (fences left out) and
// its code blocks.
func parse(t *testing.T, file string) (prose map[int]string, blocks []block) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	prose = map[int]string{}
	var cur *block
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			if cur == nil {
				cur = &block{lang: strings.TrimPrefix(strings.TrimSpace(line), "```"), line: n}
			} else {
				blocks = append(blocks, *cur)
				cur = nil
			}
			continue
		}
		if cur != nil {
			cur.text += line + "\n"
			continue
		}
		prose[n] = line
	}
	return prose, blocks
}

var (
	linkRe    = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)
	codeSpan  = regexp.MustCompile("`[^`]*`")
	headingRe = regexp.MustCompile(`^#{1,6} (.*)$`)
)

// anchors are the ids GitHub gives a file's headings.
func anchors(t *testing.T, file string) map[string]bool {
	prose, _ := parse(t, file)
	out := map[string]bool{}
	seen := map[string]int{}
	for n := 1; n <= len(prose)*2+1000; n++ {
		line, ok := prose[n]
		if !ok {
			continue
		}
		m := headingRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		id := slug(m[1])
		if k := seen[id]; k > 0 {
			out[fmt.Sprintf("%s-%d", id, k)] = true
		} else {
			out[id] = true
		}
		seen[id]++
	}
	return out
}

// slug is GitHub's heading id: lower case, punctuation other than - and _
// dropped, spaces as hyphens.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127 && isLetter(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func isLetter(r rune) bool { return strings.ContainsRune("éèàüößçñ", r) }

// TestLinks: every relative link of the documentation names a file of the
// repository, and every #fragment a heading of its file.
func TestLinks(t *testing.T) {
	for _, file := range markdown(t) {
		prose, _ := parse(t, file)
		for n, line := range prose {
			line = codeSpan.ReplaceAllString(line, "")
			for _, m := range linkRe.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, frag, _ := strings.Cut(target, "#")
				dest := file
				if path != "" {
					dest = filepath.Join(filepath.Dir(file), path)
					if _, err := os.Stat(dest); err != nil {
						t.Errorf("%s:%d: %s: no such file", file, n, target)
						continue
					}
				}
				if frag != "" && strings.HasSuffix(dest, ".md") && !anchors(t, dest)[frag] {
					t.Errorf("%s:%d: %s: no heading #%s in %s", file, n, target, frag, dest)
				}
			}
		}
	}
}

// keyType follows a dotted key through the configuration's types by their
// yaml tags; "<name>", "*" and "[]" step into maps and slices.
func keyType(t reflect.Type, key string) (reflect.Type, error) {
	for part := range strings.SplitSeq(key, ".") {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		part = strings.TrimSuffix(part, "[]")
		switch {
		case part == "*":
			return t, nil
		case strings.HasPrefix(part, "<") || t.Kind() == reflect.Map && t.Key().Kind() == reflect.String && !hasField(t, part):
			if t.Kind() != reflect.Map {
				return nil, fmt.Errorf("%s: %s is not a map", key, part)
			}
			t = t.Elem()
			continue
		}
		for t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return nil, fmt.Errorf("%s: %s is under a %s", key, part, t.Kind())
		}
		f, ok := field(t, part)
		if !ok {
			return nil, fmt.Errorf("%s: no key %q", key, part)
		}
		t = f.Type
		for t.Kind() == reflect.Slice && strings.HasSuffix(part, "[]") {
			t = t.Elem()
		}
	}
	return t, nil
}

func hasField(t reflect.Type, name string) bool {
	_, ok := field(t, name)
	return ok
}

func field(t reflect.Type, name string) (reflect.StructField, bool) {
	if t.Kind() != reflect.Struct {
		return reflect.StructField{}, false
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if tag == name {
			return f, true
		}
		if strings.Contains(opts, "inline") {
			if g, ok := field(f.Type, name); ok {
				return g, true
			}
		}
	}
	return reflect.StructField{}, false
}

var (
	cellKey = regexp.MustCompile("`([a-z_][a-z0-9_]*(?:\\.(?:[a-z0-9_]+|<[a-z_ ]+>|\\*)(?:\\[\\])?)*)(?:\\[\\])?`")
	root    = reflect.TypeFor[config.Config]()
)

// TestConfigKeys: every key in the first column of docs/configuration.md's
// tables resolves in the configuration (a key without a dot is a top-level
// key, or one beside the previous dotted key of its cell), and every YAML
// block of the documentation that is a toold configuration has only keys
// toold reads.
func TestConfigKeys(t *testing.T) {
	prose, _ := parse(t, "configuration.md")
	checked := 0
	for n, line := range prose {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cell := strings.Split(line, "|")[1]
		if strings.Contains(cell, "`-") || strings.Contains(cell, "`toold ") {
			continue // a flag or a command
		}
		parent := ""
		for _, m := range cellKey.FindAllStringSubmatch(cell, -1) {
			key := m[1]
			if _, err := keyType(root, key); err != nil && parent != "" {
				if _, err2 := keyType(root, parent+"."+key); err2 == nil {
					checked++
					continue
				}
			} else if err == nil {
				if i := strings.LastIndex(key, "."); i > 0 {
					parent = key[:i]
				}
				checked++
				continue
			}
			t.Errorf("configuration.md:%d: `%s` is not a configuration key", n, key)
		}
	}
	if checked < 30 {
		t.Errorf("only %d keys checked in configuration.md: has its table moved?", checked)
	}
	for _, file := range markdown(t) {
		_, blocks := parse(t, file)
		for _, b := range blocks {
			if b.lang != "yaml" {
				continue
			}
			var doc yaml.Node
			if yaml.Unmarshal([]byte(b.text), &doc) != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
				continue
			}
			top := doc.Content[0]
			known := 0
			for i := 0; i < len(top.Content); i += 2 {
				if hasField(root, top.Content[i].Value) {
					known++
				}
			}
			if known == 0 {
				continue // not a toold configuration (a manifest, a values file)
			}
			for _, bad := range unknownKeys(top, root, "") {
				t.Errorf("%s:%d: %s is not a configuration key", file, b.line, bad)
			}
		}
	}
}

// unknownKeys walks a YAML mapping against a configuration type.
func unknownKeys(n *yaml.Node, t reflect.Type, path string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var bad []string
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i].Value, n.Content[i+1]
			sub := strings.TrimPrefix(path+"."+key, ".")
			switch t.Kind() {
			case reflect.Map:
				bad = append(bad, unknownKeys(val, t.Elem(), sub)...)
			case reflect.Struct:
				f, ok := field(t, key)
				if !ok {
					bad = append(bad, sub)
					continue
				}
				bad = append(bad, unknownKeys(val, f.Type, sub)...)
			}
		}
	case yaml.SequenceNode:
		if t.Kind() == reflect.Slice {
			for _, item := range n.Content {
				bad = append(bad, unknownKeys(item, t.Elem(), path+"[]")...)
			}
		}
	}
	return bad
}
