package state

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/toold/toold/internal/ospath"
)

// DefaultDir is where the embedded store lives unless state.dir says
// otherwise: a directory of its own for each workspace, under the user's
// state directory by the platform's convention ($XDG_STATE_HOME/toold,
// else ~/.local/state/toold on Linux; ~/Library/Application Support/toold
// on macOS; %LOCALAPPDATA%\toold on Windows), never in the workspace the
// tools read. Two checkouts served side by side so get two stores, and
// neither locks the other out; the same workspace finds its store again at
// every start. The directory is named for the workspace's last element and
// the first 12 hex digits of the SHA-256 of its absolute path (symlinks
// resolved; case folded where the file system ignores it, so C:\Work and
// c:\work find one store): ~/.local/state/toold/myrepo-3f2c9a1b7d0e.
// An empty workspace gives the shared directory older versions used.
func DefaultDir(lookupEnv func(string) (string, bool), workspace string) (string, error) {
	return DefaultDirFor(ospath.Host(), lookupEnv, workspace)
}

// DefaultDirFor is DefaultDir by plat's convention and rules (the tests
// run every platform's).
func DefaultDirFor(plat ospath.Platform, lookupEnv func(string) (string, bool), workspace string) (string, error) {
	base, err := userStateDir(plat, lookupEnv)
	if err != nil || workspace == "" {
		return base, err
	}
	abs := workspace
	if !plat.IsAbs(abs) {
		if abs, err = filepath.Abs(workspace); err != nil {
			return "", fmt.Errorf("state.dir is not set and the workspace %s has no absolute path: %w", workspace, err)
		}
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	key := abs
	if plat.FoldCase {
		key = plat.Fold(abs)
	}
	sum := sha256.Sum256([]byte(key))
	return plat.Join(base, dirLabel(plat.Base(abs))+"-"+hex.EncodeToString(sum[:6])), nil
}

// SharedDir is the directory every workspace shared before DefaultDir gave
// each its own; toold says so when it finds a store there.
func SharedDir(lookupEnv func(string) (string, bool)) (string, error) {
	return userStateDir(ospath.Host(), lookupEnv)
}

func userStateDir(plat ospath.Platform, lookupEnv func(string) (string, bool)) (string, error) {
	home, _ := os.UserHomeDir()
	dir, ok := plat.StateHome("toold", lookupEnv, home)
	if !ok {
		return "", errors.New("state.dir is not set and there is no home directory to default to (set state.dir or -state-dir)")
	}
	return dir, nil
}

// dirLabel is a workspace's name as part of a directory name: letters,
// digits, '.', '_' and '-', at most 40 of them.
func dirLabel(name string) string {
	label := strings.Map(func(r rune) rune {
		if r == '.' || r == '_' || r == '-' || r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			return r
		}
		return '_'
	}, name)
	label = strings.TrimLeft(label, ".")
	if len(label) > 40 {
		label = label[:40]
	}
	return cmp.Or(label, "workspace")
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

// InUseError is the refusal of a state directory another process holds:
// it says which process, and how to run this one anyway.
type InUseError struct {
	Dir string
	// Holder is what the holder wrote in the lock file: its pid and when
	// it took the lock ("" when unreadable).
	Holder string
	Err    error
}

func (e *InUseError) Error() string {
	who := "another toold"
	if e.Holder != "" {
		who += " (" + e.Holder + ")"
	}
	return fmt.Sprintf("state: the state directory %s is in use by %s. "+
		"Stop that one, or give this one its own directory: -state-dir DIR, TOOLD_STATE_DIR=DIR or state.dir in its config "+
		"(or state.enabled: false to run without a store); replicas that should share one store connect to one NATS server "+
		"with state.nats.url", e.Dir, who)
}

func (e *InUseError) Unwrap() error { return e.Err }

// holderOf reads a lock file's line "PID TIME" as "pid PID, since TIME".
func holderOf(line []byte) string {
	f := strings.Fields(string(line))
	if len(f) == 0 {
		return ""
	}
	if _, err := strconv.Atoi(f[0]); err != nil {
		return ""
	}
	if len(f) > 1 {
		return "pid " + f[0] + ", since " + f[1]
	}
	return "pid " + f[0]
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
	if err := lockFile(f); err != nil {
		holder, _ := io.ReadAll(io.LimitReader(f, 200))
		f.Close()
		return nil, &InUseError{Dir: dir, Holder: holderOf(holder), Err: err}
	}
	_ = f.Truncate(0)
	_, _ = f.WriteString(strconv.Itoa(os.Getpid()) + " " + time.Now().UTC().Format(time.RFC3339) + "\n")
	return func() {
		unlockFile(f)
		f.Close()
	}, nil
}
