package config

import "fmt"

// minListenSecret is the shortest token or password a listening embedded
// store accepts (state.MinSecretLen; config does not import state).
const minListenSecret = 32

// check holds the state section to what the store will accept: one kind
// of NATS credential at a time, and a listening embedded server only with
// credentials every client must present.
func (s *StateConfig) check(probs *Error) {
	n := s.NATS
	kinds := 0
	for _, set := range []bool{n.Credentials != "", n.User != "" || n.Password != "", n.Token != "", n.NKeySeedFile != ""} {
		if set {
			kinds++
		}
	}
	if kinds > 1 {
		probs.add("state.nats", "give one kind of credential: credentials, user and password, token, or nkey_seed_file")
	}
	if (n.TLS.CertFile == "") != (n.TLS.KeyFile == "") {
		probs.add("state.nats.tls", "cert_file and key_file go together")
	}
	if n.User != "" && n.Password == "" {
		probs.add("state.nats.password", "is required with state.nats.user")
	}
	if n.Listen == "" || n.URL != "" || !s.Enabled {
		return
	}
	switch {
	case n.Credentials != "":
		probs.add("state.nats.credentials", "is for an external NATS; the embedded server's listener takes a token, user and password, nkey_seed_file or tls client certificates")
	case kinds == 0 && (n.TLS.CAFile == "" || n.TLS.CertFile == ""):
		probs.add("state.nats.listen", "the embedded NATS server accepts network clients only with credentials they must present: "+
			"set state.nats.token (e.g. ${TOOLD_NATS_TOKEN}, from `openssl rand -hex 32`), user and password, nkey_seed_file, "+
			"or tls with cert_file, key_file and ca_file (client certificates); or leave listen empty")
	case n.Token != "" && len(n.Token) < minListenSecret:
		probs.add("state.nats.token", "%s", fmt.Sprintf("must be at least %d characters when the embedded server listens (openssl rand -hex 32)", minListenSecret))
	case n.User != "" && len(n.Password) < minListenSecret:
		probs.add("state.nats.password", "%s", fmt.Sprintf("must be at least %d characters when the embedded server listens (openssl rand -hex 32)", minListenSecret))
	}
	if !Loopback(n.Listen) && n.TLS.CertFile == "" {
		probs.add("state.nats.tls", "%s", fmt.Sprintf("the embedded server listens on %q, not a loopback address: give it a cert_file and key_file, "+
			"or its credentials and every stored call cross the network in clear", n.Listen))
	}
}
