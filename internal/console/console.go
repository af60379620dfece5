// Package console serves toold's web console: one page, embedded in the
// binary, where the people in the loop approve calls, answer questions,
// watch every replica's activity, try tools and check the audit log.
//
// The console is a client of the API and nothing more: its scripts call
// the same routes with the same bearer key as curl would (the key is typed
// once and held in the tab's sessionStorage), or with the session cookie of
// a person signed in through the IdP (internal/oauth; every decision then
// carries the session's CSRF token), so every check — roles,
// self-approval, the arguments' hash, schema validation — is the API's.
// This package only serves static files, with a strict
// Content-Security-Policy: no inline script or style, nothing from another
// origin, no framing. See docs/console.md.
package console

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed assets
var assets embed.FS

// Prefix is where the console is mounted.
const Prefix = "/console/"

// CSP is the Content-Security-Policy of every console response: scripts and
// styles only from toold itself (so no inline script, no eval), fetches
// only to toold, no plugins, no framing (clickjacking an Approve button),
// no <base> rewriting, no form posting anywhere (forms are handled by the
// scripts, which POST with a bearer header or the session's CSRF token).
// Trusted Types are required too: the scripts never write HTML, and a
// stray innerHTML would be refused rather than parsed.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; require-trusted-types-for 'script'"

// Handler serves the console's assets under Prefix. Only GET and HEAD are
// answered; the assets are public (they hold no data: everything shown is
// fetched by the page with the user's key). A path that names no asset is
// handed to notFound, so it is answered as the API answers any unknown
// route.
func Handler(notFound http.Handler) http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.StripPrefix(strings.TrimSuffix(Prefix, "/"), http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		// Revalidated on each load, so a new toold's console is picked
		// up at once (the files are small; FileServer answers 304s).
		h.Set("Cache-Control", "no-cache")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path == strings.TrimSuffix(Prefix, "/") {
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
			return
		}
		if name := strings.TrimPrefix(r.URL.Path, Prefix); name != "" {
			if _, err := fs.Stat(sub, name); err != nil {
				notFound.ServeHTTP(w, r)
				return
			}
		}
		files.ServeHTTP(w, r)
	})
}
