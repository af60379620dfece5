package main

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"

	"github.com/toold/toold/internal/config"
	"github.com/toold/toold/internal/state"
)

// endpoint is one of toold's listeners, as a person who must move it
// knows it: what it serves, its flag and its configuration key.
type endpoint struct {
	what, flag, key string
	// canBeOff: the listener may be turned off (the admin listener).
	canBeOff bool
}

var (
	apiEndpoint   = endpoint{what: "the API and the console", flag: "-listen", key: "listen"}
	adminEndpoint = endpoint{what: "metrics and pprof", flag: "-admin-listen", key: "admin_listen", canBeOff: true}
)

// listen opens e's listener on addr. When it cannot, the error says what
// to do, as the state directory's does: an address in use names who may
// hold it and the flag (and key) that moves this one, with an example
// address that is free now and is none of toold's other addresses (ours).
// (Where the system's "in use" is not EADDRINUSE, as on Windows, the
// second form still names them.)
func (e endpoint) listen(addr string, ours ...string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	move := fmt.Sprintf("%s ADDRESS, %s=ADDRESS or %s in its config", e.flag, envVar(e.flag[1:]), e.key)
	if next := freePort(addr, ours...); next != "" {
		move += " (" + e.flag + " " + next + ", say)"
	}
	if e.canBeOff {
		move += ", or run without it: " + e.flag + " off"
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("%s cannot listen on %s: the address is in use, by another toold or another program.\n"+
			"Stop that one, or give this one another address: %s", e.what, addr, move)
	}
	return nil, fmt.Errorf("%s cannot listen on %s: %v.\nGive it another address: %s", e.what, addr, err, move)
}

// freePort is addr with the first port after its own that can be listened
// on now and is not one of ours (toold's other listeners: the API's port
// + 1 may be the metrics port someone chose); "" when addr names no port
// (or port 0) or none of the next 100 is free. Free now is no promise for
// later, but it is a suggestion that works when tried at once.
func freePort(addr string, ours ...string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	n, err := strconv.Atoi(port)
	if err != nil || n <= 0 {
		return ""
	}
	taken := map[string]bool{}
	for _, o := range ours {
		if _, p, err := net.SplitHostPort(o); err == nil {
			taken[p] = true
		}
	}
	for p := n + 1; p <= min(n+100, 65535); p++ {
		candidate := net.JoinHostPort(host, strconv.Itoa(p))
		if taken[strconv.Itoa(p)] {
			continue
		}
		if ln, err := net.Listen("tcp", candidate); err == nil {
			ln.Close()
			return candidate
		}
	}
	return ""
}

// secondTooldHint is, when err is the state directory held by another
// toold, the whole command that runs a second one beside it: a directory
// of its own and, since the first one holds this one's addresses too,
// addresses that are free now ("" for any other error). -stdio listens on
// nothing unless asked, so it needs the directory alone.
func secondTooldHint(err error, cfg *config.Config, stdio bool) string {
	var inUse *state.InUseError
	if !errors.As(err, &inUse) {
		return ""
	}
	cmd := "toold -state-dir DIR"
	if !stdio {
		api := cmp.Or(freePort(cfg.Listen, cfg.AdminListen), "ADDRESS")
		cmd += " -listen " + api
		if cfg.AdminListen != "" {
			cmd += " -admin-listen " + cmp.Or(freePort(cfg.AdminListen, cfg.Listen, api), "off")
		}
	}
	return "To run a second toold on this workspace beside the first, give it a state directory of its own " +
		"(and, the first holding its addresses, others): " + cmd
}
