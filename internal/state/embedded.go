package state

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"golang.org/x/sys/unix"
)

// DefaultDir is where the embedded store lives unless state.dir says
// otherwise: the user's state directory ($XDG_STATE_HOME/toold, else
// ~/.local/state/toold), never the workspace the tools read.
func DefaultDir(lookupEnv func(string) (string, bool)) (string, error) {
	if d, ok := lookupEnv("XDG_STATE_HOME"); ok && filepath.IsAbs(d) {
		return filepath.Join(d, "toold"), nil
	}
	home, ok := lookupEnv("HOME")
	if !ok || home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("state.dir is not set and there is no home directory to default to: %w", err)
		}
		home = h
	}
	return filepath.Join(home, ".local", "state", "toold"), nil
}

// embed starts the in-process server on Dir: JetStream on, no network
// listener unless Listen asks for one (and then only with credentials),
// no signal handlers, no logging of its own. The directory is locked so two processes never share it.
func (s *Store) embed() error {
	o := s.opts
	if o.Dir == "" {
		return errors.New("state: the embedded store needs a directory (state.dir)")
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return fmt.Errorf("state: cannot create state.dir %s: %w (give a writable directory in state.dir or TOOLD_STATE_DIR)", o.Dir, err)
	}
	unlock, err := lockDir(o.Dir)
	if err != nil {
		return err
	}
	s.unlock = unlock
	sopts := &server.Options{ServerName: o.Name, JetStream: true, StoreDir: o.Dir, JetStreamMaxStore: o.MaxStore,
		JetStreamMaxMemory: 64 << 20, NoSigs: true, NoLog: true, DontListen: o.Listen == ""}
	if o.Listen != "" {
		host, port, err := net.SplitHostPort(o.Listen)
		p, perr := strconv.Atoi(port)
		if err != nil || perr != nil {
			return fmt.Errorf("state: state.nats.listen %q is not host:port", o.Listen)
		}
		sopts.Host, sopts.Port = host, p
		if sopts.Port == 0 {
			sopts.Port = server.RANDOM_PORT
		}
		if err := o.serverAuth(sopts); err != nil {
			return err
		}
	}
	ns, err := server.NewServer(sopts)
	if err != nil {
		return fmt.Errorf("state: the embedded NATS server: %w", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(o.ConnectTimeout) {
		ns.Shutdown()
		return fmt.Errorf("state: the embedded NATS server in %s did not start within %v", o.Dir, o.ConnectTimeout)
	}
	if !ns.JetStreamEnabled() {
		ns.Shutdown()
		return fmt.Errorf("state: JetStream did not start in %s (is the directory writable, and is there disk space?)", o.Dir)
	}
	s.embedded = ns
	return nil
}

// ClientURL is where other processes reach the embedded server when
// Listen was given; empty otherwise.
func (s *Store) ClientURL() string {
	if s.embedded == nil || s.opts.Listen == "" {
		return ""
	}
	return s.embedded.ClientURL()
}

// lockDir takes an exclusive lock on dir/toold.lock, probing first that
// the directory is writable. A second toold on the same directory fails
// here with a clear message instead of corrupting the first one's store.
func lockDir(dir string) (func(), error) {
	path := filepath.Join(dir, "toold.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state: state.dir %s is not writable: %w (give a writable directory in state.dir or TOOLD_STATE_DIR)", dir, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("state: state.dir %s is in use by another toold (%w); give each toold its own state.dir, or point them all at one NATS server with state.nats.url", dir, err)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteString(strconv.Itoa(os.Getpid()) + " " + time.Now().UTC().Format(time.RFC3339) + "\n")
	return func() {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}
