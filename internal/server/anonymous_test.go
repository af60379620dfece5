package server

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toold/toold/internal/tools"
)

// TestAnonymousWithheld: issue 39. Without keys, the local caller is
// auth.Anonymous and holds every tool; a program toold starts that can
// reach its API (a platform without a port guard) would be that caller.
// While AnonymousWithheld gives a reason, no request is taken as
// anonymous: calls and discovery answer 401 unauthenticated, saying
// why and what to configure; health stays open; once the reason is gone,
// the anonymous caller is back.
func TestAnonymousWithheld(t *testing.T) {
	var why atomic.Value
	why.Store("containment none with network true")
	h := newHarness(t, harnessOpts{tools: testTools(), withheld: func() string { return why.Load().(string) }})
	r := h.exec("echo", `{"message": "hi"}`, nil)
	if r.status != http.StatusUnauthorized || r.env.Error == nil || r.env.Error.Code != tools.CodeUnauthenticated ||
		!strings.Contains(r.env.Error.Message, "containment none with network true") || !strings.Contains(r.env.Error.Message, "auth.keys") {
		t.Fatalf("a call while the anonymous caller is withheld: %d %+v", r.status, r.env.Error)
	}
	if r := h.do(http.MethodGet, "/tools", nil, nil); r.status != http.StatusUnauthorized {
		t.Errorf("GET /tools: %d, want 401", r.status)
	}
	if r := h.do(http.MethodGet, "/healthz", nil, nil); r.status != http.StatusOK {
		t.Errorf("/healthz: %d", r.status)
	}
	why.Store("")
	if r := h.exec("echo", `{"message": "hi"}`, nil); r.status != http.StatusOK {
		t.Errorf("with nothing exposed the anonymous caller is back: %d %+v", r.status, r.env.Error)
	}
}
