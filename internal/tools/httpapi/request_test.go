package httpapi

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toold/toold/internal/tools"
)

const issuesYAML = `
tools:
  - name: issues
    description: Searches issues.
    parameters:
      type: object
      properties:
        owner: {type: string}
        repo: {type: string}
        labels: {type: array, items: {type: string}}
        state: {type: string, default: open}
        q: {type: string}
        trace: {type: string}
        per_page: {type: integer}
      required: [owner, repo]
    request:
      url: $API/repos/{owner}/{repo}/issues?fixed=1
      query: {labels: "{labels}", state: "{state}", q: "is:{q}", per_page: "{per_page}"}
      headers: {X-Trace: "t-{trace}", Accept: application/vnd.github+json}
    auth: {bearer: tok-SECRET-123}
    allow: [127.0.0.1]
    allow_http: true
    response:
      jq: '[.[] | {number, title}]'
`

// TestRequestAsDeclared: what the API receives is exactly the declaration
// rendered with the arguments: path segments escaped, query values from
// arguments (a list repeated, an absent one left out, a default applied),
// headers fixed and templated, the credential; the answer shaped by jq.
func TestRequestAsDeclared(t *testing.T) {
	u := newUpstream(t, ok(`[{"number":1,"title":"a","body":"x"},{"number":2,"title":"b"}]`))
	s, _, _ := build(t, u, issuesYAML)
	v, err, c := call(t, s, "issues", `{"owner":"acme co","repo":"tool/d","labels":["bug","p1"],"q":"a&b=c","per_page":5}`, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustJSON(v); got != `[{"number":1,"title":"a"},{"number":2,"title":"b"}]` {
		t.Errorf("result %s", got)
	}
	r := u.last(t)
	if r.Method != "GET" || r.Path != "/repos/acme%20co/tool%2Fd/issues" {
		t.Errorf("path %s %s", r.Method, r.Path)
	}
	q, _ := url.ParseQuery(r.Query)
	want := url.Values{"fixed": {"1"}, "labels": {"bug", "p1"}, "state": {"open"}, "q": {"is:a&b=c"}, "per_page": {"5"}}
	if diff := cmp.Diff(want, q); diff != "" {
		t.Errorf("query (-want +got):\n%s", diff)
	}
	if r.Header.Get("Authorization") != "Bearer tok-SECRET-123" || r.Header.Get("X-Trace") != "" ||
		r.Header.Get("Accept") != "application/vnd.github+json" || r.Header.Get("User-Agent") != "toold" {
		t.Errorf("headers %v", r.Header)
	}
	if c.Attempts() != 1 || c.Waited() != 0 {
		t.Errorf("attempts %d, waited %v", c.Attempts(), c.Waited())
	}
	if _, err, _ := call(t, s, "issues", `{"owner":"a","repo":"b","trace":"x1"}`, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if r := u.last(t); r.Header.Get("X-Trace") != "t-x1" || strings.Contains(r.Query, "labels") {
		t.Errorf("second call: %v %s", r.Header, r.Query)
	}
	sp := s.Tools()[0].Spec()
	if sp.Category != tools.ExternalAPI || sp.Effects != (tools.Effects{ReadOnly: true, Idempotent: true, OpenWorld: true}) {
		t.Errorf("spec %v %+v", sp.Category, sp.Effects)
	}
}

// TestBodyKeepsTypes: a JSON body built from arguments keeps each value's
// type; an absent optional argument leaves its key out.
func TestBodyKeepsTypes(t *testing.T) {
	u := newUpstream(t, status(http.StatusCreated, `{"id":7}`))
	s, _, _ := build(t, u, `
tools:
  - name: create
    description: Creates an issue.
    parameters:
      type: object
      properties:
        title: {type: string}
        n: {type: integer}
        big: {type: number}
        draft: {type: boolean}
        labels: {type: array, items: {type: string}}
        meta: {type: object}
        note: {type: string}
      required: [title]
    request:
      method: POST
      url: $API/issues
      body: {title: "{title}", count: "{n}", big: "{big}", draft: "{draft}", labels: "{labels}", meta: "{meta}",
             note: "{note}", summary: "issue: {title}", fixed: [1, true, null, "x"], nested: {inner: "{n}"}}
    allow: [127.0.0.1]
    allow_http: true
`)
	args := `{"title":"Crash","n":3,"big":12345678901234567890,"draft":false,"labels":["a"],"meta":{"k":[1,2]}}`
	if v, err, _ := call(t, s, "create", args, 5*time.Second); err != nil || mustJSON(v) != `{"id":7}` {
		t.Fatalf("%v %v", v, err)
	}
	r := u.last(t)
	want := `{"big":12345678901234567890,"count":3,"draft":false,"fixed":[1,true,null,"x"],"labels":["a"],"meta":{"k":[1,2]},` +
		`"nested":{"inner":3},"summary":"issue: Crash","title":"Crash"}`
	if r.Body != want || r.Header.Get("Content-Type") != "application/json" || r.Method != "POST" {
		t.Errorf("body %s (%s)", r.Body, r.Header.Get("Content-Type"))
	}
	if sp := s.Tools()[0].Spec(); sp.Effects.ReadOnly || sp.Effects.Idempotent || !sp.Effects.OpenWorld {
		t.Errorf("a POST's effects: %+v", sp.Effects)
	}
}

// TestBadArgumentsSendNothing: arguments that would inject a header line,
// climb the path, empty a segment or blow the header cap are refused with
// the field and a reason, and the API receives nothing.
func TestBadArgumentsSendNothing(t *testing.T) {
	u := newUpstream(t, ok(`{}`))
	s, _, _ := build(t, u, `
tools:
  - name: get
    description: Gets a file.
    parameters:
      type: object
      properties: {repo: {type: string}, path: {type: string}, trace: {type: string}}
      required: [repo, path]
    request:
      url: $API/repos/{repo}/contents/{+path}
      headers: {X-Trace: "{trace}"}
    allow: [127.0.0.1]
    allow_http: true
`)
	tests := []struct{ name, args, pointer string }{
		{"CRLF in a header", `{"repo":"r","path":"a","trace":"x\r\nX-Admin: 1"}`, "/trace"},
		{"LF in a header", `{"repo":"r","path":"a","trace":"x\nHost: evil"}`, "/trace"},
		{"NUL in a header", `{"repo":"r","path":"a","trace":"x\u0000"}`, "/trace"},
		{"huge header", `{"repo":"r","path":"a","trace":"` + strings.Repeat("a", 9000) + `"}`, "/trace"},
		{"dot-dot segment", `{"repo":"..","path":"a"}`, "/repo"},
		{"dot-dot slash", `{"repo":"../admin","path":"a"}`, "/repo"},
		{"backslash climb", `{"repo":"..\\admin","path":"a"}`, "/repo"},
		{"dot segment", `{"repo":".","path":"a"}`, "/repo"},
		{"empty segment", `{"repo":"","path":"a"}`, "/repo"},
		{"climb in a slash path", `{"repo":"r","path":"docs/../../secret"}`, "/path"},
		{"empty piece of a slash path", `{"repo":"r","path":"docs//x"}`, "/path"},
		{"leading slash", `{"repo":"r","path":"/etc/passwd"}`, "/path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err, _ := call(t, s, "get", tt.args, 5*time.Second)
			te := errorOf(t, err)
			if te.Kind != tools.ValidationError || len(te.Fields) != 1 || te.Fields[0].Pointer != tt.pointer {
				t.Fatalf("%v (fields %v)", te, te.Fields)
			}
			if n := u.hits.Load(); n != 0 {
				t.Fatalf("the API received %d request(s)", n)
			}
		})
	}
	if _, err, _ := call(t, s, "get", `{"repo":"r","path":"docs/a b/c?d#e"}`, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if r := u.last(t); r.Path != "/repos/r/contents/docs/a%20b/c%3Fd%23e" || r.Query != "" || r.Address != strings.TrimPrefix(u.URL, "http://") {
		t.Errorf("slash path sent as %s ? %s to %s", r.Path, r.Query, r.Address)
	}
}

// TestDeclarationsRefused: a declaration that could send what it should
// not, or cannot work, is refused at start with where and why.
func TestDeclarationsRefused(t *testing.T) {
	const head = "tools:\n  - name: t\n    description: d.\n    parameters: {type: object, properties: {id: {type: string}, opt: {type: string}, list: {type: array}}, required: [id]}\n"
	tests := []struct{ name, decl, say string }{
		{"host placeholder", "    request: {url: 'https://{id}.example.com/x'}\n", "the host cannot hold a placeholder"},
		{"host from argument", "    request: {url: 'https://api.example.com{id}/x'}\n", "the host cannot hold a placeholder"},
		{"userinfo", "    request: {url: 'https://user:pw@api.example.com/x'}\n", "without credentials"},
		{"fragment", "    request: {url: 'https://api.example.com/x#{id}'}\n", "fragment"},
		{"query placeholder in URL", "    request: {url: 'https://api.example.com/x?id={id}'}\n", "request.query"},
		{"unknown placeholder", "    request: {url: 'https://api.example.com/x/{idd}'}\n", `{idd} is not a parameter (did you mean "id"?)`},
		{"optional path placeholder", "    request: {url: 'https://api.example.com/x/{opt}'}\n", "must be required or have a default"},
		{"list in the path", "    parameters: {type: object, properties: {list: {type: array}}, required: [list]}\n    request: {url: 'https://api.example.com/{list}'}\n", "declared array"},
		{"literal dot-dot", "    request: {url: 'https://api.example.com/a/../b'}\n", `".." segments`},
		{"unclosed brace", "    request: {url: 'https://api.example.com/{id'}\n", "a { without its }"},
		{"Host header", "    request: {url: 'https://api.example.com/', headers: {Host: evil.example}}\n", "toold sets Host itself"},
		{"header line break", "    request: {url: 'https://api.example.com/', headers: {X-A: \"a\\r\\nB: c\"}}\n", "line break"},
		{"bad header name", "    request: {url: 'https://api.example.com/', headers: {'X A': b}}\n", "not a header name"},
		{"header overriding auth", "    request: {url: 'https://api.example.com/', headers: {Authorization: x}}\n    auth: {bearer: abcd}\n", "the credential (auth) sets Authorization"},
		{"two credentials", "    request: {url: 'https://api.example.com/'}\n    auth: {bearer: abcd, query: {name: key, value: x}}\n", "give one of"},
		{"body on GET", "    request: {url: 'https://api.example.com/', body: {a: 1}}\n", "a GET request has no body"},
		{"body not JSON", "    request: {method: POST, url: 'https://api.example.com/', body: {a: 1}, headers: {Content-Type: text/plain}}\n", "sent as JSON"},
		{"bad jq", "    request: {url: 'https://api.example.com/'}\n    response: {jq: '.items[] |'}\n", "response.jq"},
		{"http without allow_http", "    request: {url: 'http://api.example.com/'}\n", "plain http is not allowed"},
		{"private literal", "    request: {url: 'https://10.1.2.3/'}\n", "10.1.2.3 is not a public address"},
		{"metadata", "    request: {url: 'https://169.254.169.254/latest'}\n    allow: [169.254.0.0/16]\n", "cloud metadata"},
		{"localhost", "    request: {url: 'https://localhost:8080/'}\n", "names this host"},
		{"not absolute", "    request: {url: '/x'}\n", "not an absolute URL"},
		{"base above max", "    request: {url: 'https://api.example.com/'}\n    retry: {base: 5s, max: 1s}\n", "retry: base"},
		{"unknown method", "    request: {method: FETCH, url: 'https://api.example.com/'}\n", "request.method"},
		{"unknown format", "    request: {url: 'https://api.example.com/'}\n    response: {format: xml}\n", "response.format"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := head + tt.decl
			if strings.HasPrefix(tt.decl, "    parameters:") {
				src = "tools:\n  - name: t\n    description: d.\n" + tt.decl
			}
			_, err := tryBuild(nil, src)
			if err == nil || !strings.Contains(err.Error(), tt.say) {
				t.Fatalf("error %v, want one saying %q", err, tt.say)
			}
		})
	}
	s, err := tryBuild(nil, head+"    request: {url: 'https://api.example.com/x/{id}'}\nhosts: {api.example.org: {rate: {per_second: 1}}}\n")
	if err != nil {
		t.Fatal(err) // a declarer may still call the host
	}
	if err := s.CheckHosts(); err == nil || !strings.Contains(err.Error(), "http.hosts.api.example.org: no HTTP tool calls this host (hosts: api.example.com)") {
		t.Errorf("an unused hosts entry: %v", err)
	}
}

// FuzzRenderURL: whatever the arguments, the URL keeps the template's
// scheme and host and its number of segments, and holds no dot segment.
func FuzzRenderURL(f *testing.F) {
	for _, s := range []string{"a", "../x", "a/b", "%2e%2e", "x?y#z", "\r\n", "..", "a\\..\\b", "@evil.com", "//evil.com"} {
		f.Add(s, s)
	}
	tpl, err := parseURL("https://api.example.com:8443/v1/{a}/x/{+b}")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		u, err := tpl.render(map[string]any{"a": a, "b": b}, url.Values{"q": {a}}.Encode())
		if err != nil {
			if te, ok := tools.AsError(err); !ok || te.Kind != tools.ValidationError {
				t.Fatalf("error %v", err)
			}
			return
		}
		if u.Scheme != "https" || u.Host != "api.example.com:8443" || u.User != nil || u.Fragment != "" {
			t.Fatalf("%q, %q made %s", a, b, u)
		}
		segs := strings.Split(u.EscapedPath(), "/")
		if len(segs) != 4+1+strings.Count(b, "/") {
			t.Fatalf("%q, %q made %d segments: %s", a, b, len(segs), u.EscapedPath())
		}
		for _, seg := range segs[1:] {
			plain, _ := url.PathUnescape(seg)
			if plain == "." || plain == ".." || seg == "" {
				t.Fatalf("%q, %q made segment %q in %s", a, b, seg, u.EscapedPath())
			}
		}
		if q := u.Query().Get("q"); q != a {
			t.Fatalf("query %q, want %q", q, a)
		}
	})
}

func FuzzParseText(f *testing.F) {
	for _, s := range []string{"{a}", "x{+b}y", "{{}}", "{", "}", "{a}{b}", "{ a }"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tx, err := parseText(s)
		if err != nil {
			return
		}
		out, ok, err := tx.render(map[string]any{})
		if err != nil || (ok && !tx.literal()) || (tx.literal() && !ok) {
			t.Fatalf("%q: %q %v %v", s, out, ok, err)
		}
	})
}
