package console

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func serve(t *testing.T, method, path string) *http.Response {
	t.Helper()
	notFound := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "envelope", http.StatusNotFound) })
	w := httptest.NewRecorder()
	Handler(notFound).ServeHTTP(w, httptest.NewRequest(method, path, nil))
	return w.Result()
}

// TestHandler: every asset is served with its type and the security
// headers; an unknown path goes to the API's not-found answer; only GET
// and HEAD are answered.
func TestHandler(t *testing.T) {
	for _, c := range []struct {
		method, path string
		status       int
		ctype        string
	}{
		{"GET", "/console/", 200, "text/html"},
		{"GET", "/console/app.js", 200, "text/javascript"},
		{"GET", "/console/console.css", 200, "text/css"},
		{"GET", "/console/favicon.svg", 200, "image/svg+xml"},
		{"HEAD", "/console/api.js", 200, "text/javascript"},
		{"GET", "/console", 301, ""},
		{"GET", "/console/nope.js", 404, "text/plain"},
		{"GET", "/console/../console.go", 404, "text/plain"},
		{"POST", "/console/", 405, "text/plain"},
	} {
		resp := serve(t, c.method, c.path)
		if resp.StatusCode != c.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), c.ctype) {
			t.Errorf("%s %s: %d %q", c.method, c.path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		for h, want := range map[string]string{"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY"} {
			if got := resp.Header.Get(h); got != want {
				t.Errorf("%s %s: %s is %q", c.method, c.path, h, got)
			}
		}
	}
	if loc := serve(t, "GET", "/console").Header.Get("Location"); loc != "/console/" {
		t.Errorf("/console redirects to %q", loc)
	}
}

// TestFavicon: the page names its icon, and the icon is embedded, so a
// browser does not ask for /favicon.ico and log the 404 at every load.
func TestFavicon(t *testing.T) {
	page, err := fs.ReadFile(assets, "assets/index.html")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`<link rel="icon" href="([^"]+)"`).FindSubmatch(page)
	if m == nil {
		t.Fatal("index.html links no icon")
	}
	if resp := serve(t, "GET", Prefix+string(m[1])); resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "image/") {
		t.Errorf("the icon %s: %d %q", m[1], resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// TestCSP holds the policy to what docs/console.md promises.
func TestCSP(t *testing.T) {
	for _, d := range []string{"default-src 'self'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "base-uri 'none'"} {
		if !strings.Contains(CSP, d+";") && !strings.HasSuffix(CSP, d) {
			t.Errorf("the CSP lacks %q", d)
		}
	}
	if strings.Contains(CSP, "unsafe") || strings.Contains(CSP, "http") {
		t.Errorf("the CSP allows too much: %s", CSP)
	}
}

// TestAssetsStayInside: no inline script or style, no event-handler
// attributes, no HTML written from strings, no eval, nothing loaded from
// another origin. The CSP would refuse most of it at run time; this says
// which file at build time.
func TestAssetsStayInside(t *testing.T) {
	forbidden := map[string]*regexp.Regexp{
		"inline script":       regexp.MustCompile(`<script(?:\s+type="module")?\s*>`),
		"inline style":        regexp.MustCompile(`<style|\sstyle=`),
		"handler attribute":   regexp.MustCompile(`\son[a-z]+=`),
		"HTML from a string":  regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write`),
		"eval":                regexp.MustCompile(`\beval\(|new Function\(|setTimeout\(['"]`),
		"another origin":      regexp.MustCompile(`(?:src|href)=["']?(?:https?:)?//`),
		"fetch to elsewhere":  regexp.MustCompile(`fetch\(['"]https?:`),
		"import from outside": regexp.MustCompile(`from ['"]https?:`),
	}
	err := fs.WalkDir(assets, "assets", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, err := assets.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		b, err := io.ReadAll(f)
		if err != nil {
			return err
		}
		for what, re := range forbidden {
			if m := re.Find(b); m != nil {
				t.Errorf("%s: %s: %q", path, what, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
