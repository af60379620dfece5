package main

import (
	"errors"
	"net"
	"net/url"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/toold/toold/internal/launch"
)

// protectPorts takes toold's listening ports away from every program it
// starts from now on (launch.ProtectPorts: Landlock), so that no command,
// MCP server or consultation CLI with the network reaches toold's own API
// or admin listener (issue 24, finding 1). Called once the listeners are
// bound, before any program starts. Where the kernel cannot, toold still
// starts and says so: the other defences (no anonymous approval, keys)
// stand. The embedded store's NATS listener (state.nats.listen), when
// there is one, is taken too: it asks for credentials, but a program has
// no business there either.
func (a *app) protectPorts(lns ...net.Listener) {
	if a.launcher == nil {
		return
	}
	var ports []int
	for _, ln := range lns {
		if ln == nil {
			continue
		}
		if addr, ok := ln.Addr().(*net.TCPAddr); ok {
			ports = append(ports, addr.Port)
		}
	}
	if a.store != nil {
		if u, err := url.Parse(a.store.ClientURL()); err == nil && u.Port() != "" {
			if p, err := strconv.Atoi(u.Port()); err == nil {
				ports = append(ports, p)
			}
		}
	}
	err := a.launcher.ProtectPorts(ports...)
	switch {
	case err == nil:
		a.log.Info("toold's ports are out of its programs' reach", zap.Ints("ports", ports))
	case errors.Is(err, launch.ErrNoPortGuard):
		a.log.Warn("programs toold starts with the network can reach its own listeners", zap.Ints("ports", ports), zap.Error(err))
	default:
		a.log.Error("taking toold's ports from its programs failed: they can reach its listeners", zap.Ints("ports", ports), zap.Error(err))
	}
	if why := a.anonymousWithheld(); why != "" {
		a.log.Warn("no caller is anonymous: a program toold starts could reach its API, and would hold every tool as the "+
			"anonymous caller; configure auth.keys (toold -new-key)", zap.String("exposed", why))
	}
}

// anonymousWithheld says why no request may be the anonymous caller
// (server.Options.AnonymousWithheld), "" when one may: with no keys or
// issuers the anonymous caller holds every tool, so while a sandbox whose
// programs can reach toold's listeners exists (no port guard on this
// platform, or containment none where none has no guard: launch.Exposed),
// every request must carry a key. Asked at each anonymous request: an MCP
// server's sandbox is resolved when it starts.
func (a *app) anonymousWithheld() string {
	if a.launcher == nil {
		return ""
	}
	return strings.Join(a.launcher.Exposed(), "; ")
}
