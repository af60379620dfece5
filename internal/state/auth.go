package state

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// TLS names the certificate files of a NATS connection. For an external
// store they are the client's side: CAFile verifies the servers, CertFile
// and KeyFile are this replica's client certificate. For the embedded
// server's listener they are the server's side: CertFile and KeyFile are
// its certificate, and CAFile, when set, makes it require a client
// certificate signed by that CA from every network client.
type TLS struct {
	CAFile, CertFile, KeyFile string
}

func (t TLS) empty() bool { return t == TLS{} }

// MinSecretLen is the shortest token or password a listening embedded
// store accepts: 32 characters (`openssl rand -hex 16`), out of reach of
// guessing over the network.
const MinSecretLen = 32

// errNoCredentials is why a store does not listen without credentials.
var errNoCredentials = errors.New("state: the embedded NATS server accepts network clients (state.nats.listen) only with credentials " +
	"every client must present: set state.nats.token (e.g. ${TOOLD_NATS_TOKEN} from `openssl rand -hex 32`), " +
	"state.nats.user and password, state.nats.nkey_seed_file, or state.nats.tls with a ca_file (client certificates)")

// hasCredentials reports whether the options name a credential a client
// must present.
func (o *Options) hasCredentials() bool {
	return o.Token != "" || o.User != "" || o.NKeySeedFile != "" || (o.TLS.CAFile != "" && o.TLS.CertFile != "")
}

// serverAuth makes the embedded server, when it listens, require the
// credentials of the options from every client (toold's own in-process
// connection presents them too). Without any it refuses to listen: an
// open listener gave any local process the stored call arguments and the
// power to purge the audit log.
func (o *Options) serverAuth(sopts *server.Options) error {
	if !o.hasCredentials() {
		return errNoCredentials
	}
	if (o.Token != "" && len(o.Token) < MinSecretLen) || (o.User != "" && len(o.Password) < MinSecretLen) {
		return fmt.Errorf("state: state.nats.token or password must be at least %d characters when the embedded server listens", MinSecretLen)
	}
	switch {
	case o.Token != "":
		sopts.Authorization = o.Token
	case o.User != "":
		sopts.Username, sopts.Password = o.User, o.Password
	case o.NKeySeedFile != "":
		pub, err := nkeyPublic(o.NKeySeedFile)
		if err != nil {
			return err
		}
		sopts.Nkeys = []*server.NkeyUser{{Nkey: pub}}
	}
	if host, _, _ := net.SplitHostPort(o.Listen); !loopbackHost(host) && o.TLS.CertFile == "" {
		return fmt.Errorf("state: state.nats.listen %q is not a loopback address: give state.nats.tls a cert_file and key_file, "+
			"or the credentials and every stored call would cross the network in clear", o.Listen)
	}
	if o.TLS.CertFile == "" {
		return nil
	}
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: o.TLS.CertFile, KeyFile: o.TLS.KeyFile,
		CaFile: o.TLS.CAFile, Verify: o.TLS.CAFile != ""})
	if err != nil {
		return fmt.Errorf("state: state.nats.tls: %w", err)
	}
	sopts.TLSConfig, sopts.TLS, sopts.TLSVerify, sopts.TLSTimeout = tc, true, o.TLS.CAFile != "", 5
	return nil
}

func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// nkeyPublic reads a user seed file and returns its public key, which
// the server checks the client's signed nonce against (the seed itself
// never crosses the connection).
func nkeyPublic(file string) (string, error) {
	seed, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("state: state.nats.nkey_seed_file: %w", err)
	}
	kp, err := nkeys.FromSeed([]byte(strings.TrimSpace(string(seed))))
	if err != nil {
		return "", fmt.Errorf("state: state.nats.nkey_seed_file %s holds no NKey seed: %w", file, err)
	}
	defer kp.Wipe()
	pub, err := kp.PublicKey()
	if err != nil || !nkeys.IsValidPublicUserKey(pub) {
		return "", fmt.Errorf("state: state.nats.nkey_seed_file %s is not a user seed (SU...): generate one with `nk -gen user`", file)
	}
	return pub, nil
}

// clientAuth is what this process presents to the server: the options'
// credentials, and for a store reached over the network its TLS files.
func (o *Options) clientAuth(inProcess bool) ([]nats.Option, error) {
	var opts []nats.Option
	switch {
	case o.Credentials != "":
		opts = append(opts, nats.UserCredentials(o.Credentials))
	case o.User != "":
		opts = append(opts, nats.UserInfo(o.User, o.Password))
	case o.Token != "":
		opts = append(opts, nats.Token(o.Token))
	case o.NKeySeedFile != "":
		opt, err := nats.NkeyOptionFromSeed(o.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("state: state.nats.nkey_seed_file: %w", err)
		}
		opts = append(opts, opt)
	}
	// The in-process connection is a pipe inside this process: the
	// server does not ask it for TLS, and the certificate files are the
	// server's own.
	if inProcess || o.TLS.empty() {
		return opts, nil
	}
	if o.TLS.CAFile != "" {
		opts = append(opts, nats.RootCAs(o.TLS.CAFile))
	}
	if o.TLS.CertFile != "" {
		opts = append(opts, nats.ClientCert(o.TLS.CertFile, o.TLS.KeyFile))
	}
	return opts, nil
}
