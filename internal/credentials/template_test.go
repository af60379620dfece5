package credentials_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/credentials"
)

type mapResolver map[string]string

func (m mapResolver) Resolve(_ context.Context, _ *auth.Identity, name string) ([]byte, error) {
	if v, ok := m[name]; ok {
		return []byte(v), nil
	}
	return nil, credentials.ErrMissing
}

func TestTemplate(t *testing.T) {
	r := mapResolver{"gh": "G", "jira": "J"}
	for _, tt := range []struct{ in, want, missing string }{
		{"Bearer ${user:gh}", "Bearer G", ""},
		{"${user:gh}:${user:jira}", "G:J", ""},
		{"static", "static", ""},
		{"${user:nope}", "", "nope"},
		{"a ${user:gh} b ${user:gh}", "a G b G", ""},
	} {
		tmpl, err := credentials.ParseTemplate(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tmpl.Render(context.Background(), r, nil)
		var me *credentials.MissingError
		switch {
		case tt.missing != "":
			if !errors.As(err, &me) || me.Name != tt.missing || !errors.Is(err, credentials.ErrMissing) {
				t.Errorf("%q: %v", tt.in, err)
			}
		case err != nil || got != tt.want:
			t.Errorf("%q: %q %v", tt.in, got, err)
		}
	}
	for _, bad := range []string{"${user:", "${user:a/b}", "${user:}"} {
		if _, err := credentials.ParseTemplate(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzTemplate: any configured value parses or is refused; what parses
// renders its literal parts as written and names only valid credentials.
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{"Bearer ${user:gh}", "${user:a}${user:b}", "${user:", "$${user:x}", "plain"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tmpl, err := credentials.ParseTemplate(s)
		if err != nil {
			return
		}
		for _, n := range tmpl.Refs() {
			if !credentials.ValidName(n) {
				t.Fatalf("%q names %q", s, n)
			}
		}
		r := mapResolver{}
		for _, n := range tmpl.Refs() {
			r[n] = "${user:" + n + "}"
		}
		got, err := tmpl.Render(context.Background(), r, nil)
		if err != nil || got != s && !strings.Contains(s, "${user:") {
			t.Fatalf("%q rendered %q %v", s, got, err)
		}
		if got != s {
			t.Fatalf("%q rendered with its own references as %q", s, got)
		}
	})
}
