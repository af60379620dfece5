// Package egress is the network of a run whose sandbox says
// `network: {allow: [...]}`: an HTTP proxy toold serves inside the run's
// network namespace, the run's only way out. It answers CONNECT (HTTPS)
// and plain http:// requests for the hosts of the allow-list, refuses
// every other with 403 and a body naming the host and the list, resolves
// allowed names itself through the outbound guard (netguard), and for the
// hosts of `inject` terminates TLS with a certificate authority made for
// the run, in memory, so that it adds a header the program never sees and
// redacts the header's value from what the server sends back. A value
// may name the calling principal's own credential, ${user:NAME}: the run
// asks toold's vault (Options.Vault, internal/credentials) for the
// principal of the call its ctx carries, at the first request that
// needs it.
//
// internal/launch owns the rest: the network namespace, the listener in
// it, the run's environment (HTTP_PROXY and the CA variables) and the
// bundle file; it makes one Run per run and closes it when the run ends.
// A Compiled policy is made once per sandbox, when toold wires the tool.
//
//	c, err := egress.Compile(egress.Policy{
//		Allow:  []string{"api.github.com", "*.npmjs.org"},
//		Inject: []egress.Inject{{Host: "api.github.com", Header: "Authorization", Value: "Bearer " + token}},
//	}, egress.Options{Metrics: egress.NewMetrics(reg)})
//	run, err := c.NewRun(ctx, egress.RunOptions{Tool: "gh"})
//	env := run.Env("127.0.0.1:3128", bundlePath) // bundlePath holds run.Bundle()
//	run.Serve(listenerInTheRunsNamespace)
//	// ... the program runs ...
//	report := run.Close() // network.refused, connections, bytes
//
// What each reason means, what holds and what does not: docs/security.md
// ("Egress").
package egress
