package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
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
// variable and key that move this listener (or turn the admin one off),
// with an address to try that is free and none of toold's own: here the
// port after the taken one is taken too, and the one after that is the
// admin listener's.
func TestPortInUse(t *testing.T) {
	taken, port := takenRun(t)
	addr := taken[0].Addr().String()
	at := func(p int) string { return "127.0.0.1:" + strconv.Itoa(p) }
	for _, tc := range []struct {
		name string
		args []string
		say  []string
	}{
		{"the API", []string{"-listen", addr, "-admin-listen", at(port + 2)},
			[]string{"the API and the console cannot listen on " + addr + ": the address is in use", "Stop that one",
				"-listen ADDRESS, TOOLD_LISTEN=ADDRESS or listen in its config (-listen " + at(port+3) + ", say)"}},
		{"the admin listener", []string{"-listen", at(port + 2), "-admin-listen", addr},
			[]string{"metrics and pprof cannot listen on " + addr + ": the address is in use",
				"-admin-listen ADDRESS, TOOLD_ADMIN_LISTEN=ADDRESS or admin_listen in its config (-admin-listen " + at(port+3) + ", say)",
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

// takenRun holds two consecutive loopback ports, P and P+1, with P+2 and
// P+3 free when it returns (tried a few times: another process may take
// one meanwhile).
func takenRun(t *testing.T) ([]net.Listener, int) {
	t.Helper()
	for range 20 {
		first, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := first.Addr().(*net.TCPAddr).Port
		if p > 65530 {
			first.Close()
			continue
		}
		second, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+1))
		if err != nil {
			first.Close()
			continue
		}
		free := true
		for _, q := range []int{p + 2, p + 3} {
			ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(q))
			if err != nil {
				free = false
				break
			}
			ln.Close()
		}
		if !free {
			first.Close()
			second.Close()
			continue
		}
		t.Cleanup(func() { first.Close(); second.Close() })
		return []net.Listener{first, second}, p
	}
	t.Fatal("found no run of four free loopback ports")
	return nil, 0
}
