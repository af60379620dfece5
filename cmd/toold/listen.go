package main

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
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
// hold it and the flag (and key) that moves this one, with an example.
// (Where the system's "in use" is not EADDRINUSE, as on Windows, the
// second form still names them.)
func (e endpoint) listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	move := fmt.Sprintf("%s ADDRESS, %s=ADDRESS or %s in its config", e.flag, envVar(e.flag[1:]), e.key)
	if next := nextPort(addr); next != "" {
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

// nextPort is addr with the port after its own ("" when addr names none,
// or port 0).
func nextPort(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	n, err := strconv.Atoi(port)
	if err != nil || n <= 0 || n >= 65535 {
		return ""
	}
	return net.JoinHostPort(host, strconv.Itoa(n+1))
}
