package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestBannerNamesConsole: the start-up lines say where the console is,
// and it is there.
func TestBannerNamesConsole(t *testing.T) {
	in := start(t, nil, "-workspace", workspace(t))
	want := "console on " + in.url + "/console/\n"
	if !strings.Contains(in.stdout.String(), want) {
		t.Fatalf("the start-up lines do not say %q:\n%s", want, in.stdout)
	}
	resp, err := http.Get(in.url + "/console/") // a page, not an API operation
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("the console named at start: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// TestPortInUse: an address already taken stops toold with what to do,
// as the state directory's error does: that it is in use, and the flag,
// variable and key that move this listener (or turn the admin one off).
func TestPortInUse(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addr := taken.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	if port == "65535" {
		t.Skip("the port taken is the last one: there is no next to suggest")
	}
	next := nextPort(addr)
	for _, tc := range []struct {
		name string
		args []string
		say  []string
	}{
		{"the API", []string{"-listen", addr, "-admin-listen", "off"},
			[]string{"the API and the console cannot listen on " + addr + ": the address is in use", "Stop that one",
				"-listen ADDRESS, TOOLD_LISTEN=ADDRESS or listen in its config (-listen " + next + ", say)"}},
		{"the admin listener", []string{"-listen", "127.0.0.1:0", "-admin-listen", addr},
			[]string{"metrics and pprof cannot listen on " + addr + ": the address is in use",
				"-admin-listen ADDRESS, TOOLD_ADMIN_LISTEN=ADDRESS or admin_listen in its config (-admin-listen " + next + ", say)",
				"or run without it: -admin-listen off"}},
		{"the admin listener of -stdio", []string{"-stdio", "-admin-listen", addr},
			[]string{"metrics and pprof cannot listen on " + addr + ": the address is in use", "-admin-listen off"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"-workspace", workspace(t), "-state-dir", t.TempDir()}, tc.args...)
			var stderr syncBuffer
			err := run(context.Background(), args, func(string) (string, bool) { return "", false }, strings.NewReader(""), io.Discard, &stderr)
			if err == nil {
				t.Fatal("toold started on an address in use")
			}
			for _, s := range tc.say {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("the error does not say %q:\n%v", s, err)
				}
			}
		})
	}
}
