package auth

import (
	"strings"
	"testing"
)

// TestRoles: a key without roles may call; listed roles are what it holds;
// an unknown role is refused at start; the anonymous caller has them all.
func TestRoles(t *testing.T) {
	kr, err := NewKeyring([]Key{
		{Name: "agent", SHA256: Hash("agent-key-0123456789"), Tools: []string{"*"}},
		{Name: "watcher", SHA256: Hash("watcher-key-012345678"), Tools: []string{"*"}, Roles: []Role{RoleObserve}},
		{Name: "ops", SHA256: Hash("ops-key-0123456789ab"), Tools: []string{"*"}, Roles: []Role{RoleAdmin, RoleCall}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		key  string
		want map[Role]bool
	}{
		{"agent-key-0123456789", map[Role]bool{RoleCall: true}},
		{"watcher-key-012345678", map[Role]bool{RoleObserve: true}},
		{"ops-key-0123456789ab", map[Role]bool{RoleAdmin: true, RoleCall: true}},
	} {
		p := kr.Authenticate(tt.key)
		for _, r := range Roles {
			if p.Has(r) != tt.want[r] {
				t.Errorf("%s has %s: %v", p.Name, r, p.Has(r))
			}
		}
	}
	for _, r := range Roles {
		if !Anonymous.Has(r) {
			t.Errorf("anonymous lacks %s", r)
		}
	}
	_, err = NewKeyring([]Key{{Name: "x", SHA256: Hash("x-key-0123456789abc"), Tools: []string{"*"}, Roles: []Role{"approver"}}})
	if err == nil || !strings.Contains(err.Error(), `role "approver" is not one of`) {
		t.Errorf("unknown role: %v", err)
	}
}

// TestAllowsByName: a call run after its request is held to the tools of
// the key it came with; a key removed since may use nothing; without keys
// everything is allowed.
func TestAllowsByName(t *testing.T) {
	kr, err := NewKeyring([]Key{
		{Name: "reader", SHA256: Hash("reader-key-0123456789"), Tools: []string{"read_*"}},
		{Name: "all", SHA256: Hash("all-key-0123456789ab"), Tools: []string{"*"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	none, _ := NewKeyring(nil)
	for _, tt := range []struct {
		kr           *Keyring
		caller, tool string
		want         bool
	}{
		{kr, "reader", "read_file", true},
		{kr, "reader", "write_file", false},
		{kr, "all", "write_file", true},
		{kr, "gone", "read_file", false},
		{kr, "anonymous", "read_file", false},
		{none, "anonymous", "write_file", true},
	} {
		if got := tt.kr.Allows(tt.caller, tt.tool); got != tt.want {
			t.Errorf("%s may use %s: %v, want %v", tt.caller, tt.tool, got, tt.want)
		}
	}
}

// TestViewKey: listings are cached per view: a key's own, and for tokens
// one per issuer and claim narrowing, whoever the subject (an empty
// narrowing is not no narrowing).
func TestViewKey(t *testing.T) {
	tok := func(sub string, narrow []string) string {
		return NewTokenPrincipal(Identity{Issuer: "https://idp.test/", Subject: sub}, []string{"*"}, narrow, nil).ViewKey()
	}
	if tok("a", nil) != tok("b", nil) || tok("a", []string{"read_*"}) != tok("b", []string{"read_*"}) {
		t.Error("subjects with the same grants have different views")
	}
	if tok("a", nil) == tok("a", []string{}) || tok("a", []string{}) == tok("a", []string{"read_*"}) {
		t.Error("different grants share a view")
	}
	kr, _ := NewKeyring([]Key{{Name: "ops", SHA256: Hash("ops-key-0123456789ab"), Tools: []string{"*"}}})
	if kr.Authenticate("ops-key-0123456789ab").ViewKey() != "ops" {
		t.Error("a key's view is not its name")
	}
}

// TestKeyringReplace: a reload's keys answer the next request; a key
// removed authenticates no more, and a principal given before keeps its
// tools.
func TestKeyringReplace(t *testing.T) {
	kr, err := NewKeyring([]Key{{Name: "old", SHA256: Hash("old-key-0123456789"), Tools: []string{"read_file"}}})
	if err != nil {
		t.Fatal(err)
	}
	p := kr.Authenticate("old-key-0123456789")
	next, err := NewKeyring([]Key{{Name: "new", SHA256: Hash("new-key-0123456789"), Tools: []string{"*"}}})
	if err != nil {
		t.Fatal(err)
	}
	kr.Replace(next)
	if kr.Authenticate("old-key-0123456789") != nil || kr.Allows("old", "read_file") {
		t.Error("the removed key still authenticates or allows")
	}
	if q := kr.Authenticate("new-key-0123456789"); q == nil || !q.Allows("grep") || kr.Principal("new") != q {
		t.Error("the added key does not authenticate")
	}
	if p == nil || !p.Allows("read_file") || p.Allows("grep") {
		t.Error("the principal authenticated before the reload changed")
	}
	empty, _ := NewKeyring(nil)
	kr.Replace(empty)
	if kr.Enabled() || !kr.Allows("anyone", "grep") {
		t.Error("a keyring replaced by no keys still asks for one")
	}
}
