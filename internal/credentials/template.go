package credentials

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/toold/toold/internal/auth"
)

// Template is a configured value that may name the caller's own
// credentials: "Bearer ${user:github}", "${user:jira_token}". It is kept
// as written and rendered only by the code making the outbound request,
// for the principal of the call, through a Resolver.
type Template struct {
	parts []part
	refs  []string
}

type part struct {
	lit string
	ref string // a credential's name when not empty
}

// ParseTemplate reads s; ${user:name} names a credential (ValidName), and
// anything else is literal (${ENV} was expanded by the configuration
// before).
func ParseTemplate(s string) (Template, error) {
	var t Template
	for {
		i := strings.Index(s, "${user:")
		if i < 0 {
			break
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return Template{}, errors.New("${user: without its closing }")
		}
		name := s[i+len("${user:") : i+end]
		if !ValidName(name) {
			return Template{}, fmt.Errorf("${user:%s}: a credential's name is 1-64 of a-z A-Z 0-9 _ . -", name)
		}
		if i > 0 {
			t.parts = append(t.parts, part{lit: s[:i]})
		}
		t.parts = append(t.parts, part{ref: name})
		if !contains(t.refs, name) {
			t.refs = append(t.refs, name)
		}
		s = s[i+end+1:]
	}
	if s != "" || len(t.parts) == 0 {
		t.parts = append(t.parts, part{lit: s})
	}
	return t, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Refs are the credentials the template names, in order, once each.
func (t Template) Refs() []string { return t.refs }

// PerUser reports whether the template names a credential.
func (t Template) PerUser() bool { return len(t.refs) > 0 }

// Literal is the template's text when it names no credential.
func (t Template) Literal() string {
	var b strings.Builder
	for _, p := range t.parts {
		b.WriteString(p.lit)
	}
	return b.String()
}

// MissingError is a principal without a credential a template names:
// errors.Is(err, ErrMissing).
type MissingError struct{ Name string }

func (e *MissingError) Error() string {
	return fmt.Sprintf("no credential %q is set for this caller", e.Name)
}

// Is makes errors.Is(err, ErrMissing) true.
func (e *MissingError) Is(target error) bool { return target == ErrMissing }

// Render writes the template with who's credentials, resolved now; a
// missing one is a *MissingError naming it. The result is a secret: the
// caller puts it on the request and nowhere else.
func (t Template) Render(ctx context.Context, r Resolver, who *auth.Identity) (string, error) {
	if len(t.refs) == 0 {
		return t.Literal(), nil
	}
	if r == nil {
		return "", errors.New("credentials: a per-user credential is configured but toold has no vault")
	}
	var b strings.Builder
	for _, p := range t.parts {
		if p.ref == "" {
			b.WriteString(p.lit)
			continue
		}
		v, err := r.Resolve(ctx, who, p.ref)
		if errors.Is(err, ErrMissing) {
			return "", &MissingError{Name: p.ref}
		}
		if err != nil {
			return "", err
		}
		b.Write(v)
	}
	return b.String(), nil
}
