package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/config"
	"github.com/toold/toold/internal/state"
	"github.com/toold/toold/internal/tools"
)

// ReloadSubject carries `toold reload`'s requests to every replica on the
// store (core NATS): each reads its own file again. A replica that is down
// misses it, and reads the file when it starts.
const ReloadSubject = "toold.reload"

// watchDebounce is how long the file must be quiet after a change before
// it is read: an editor's or a ConfigMap's update is several events.
const watchDebounce = 300 * time.Millisecond

// reloadConfig reads the configuration as run does at start.
func reloadConfig(o *options, lookupEnv func(string) (string, bool), withState bool) (*config.Config, error) {
	cfg, err := loadConfig(o, lookupEnv)
	if err != nil {
		return nil, err
	}
	if err := checkOwnFiles(cfg, o.config, withState); err != nil {
		return nil, err
	}
	cfg.Commands.Private = privatePaths(cfg, o.config, withState)
	return cfg, nil
}

// reloadRequest serves POST /admin/reload.
func (a *app) reloadRequest(ctx context.Context, who *auth.Identity, caller, requestID string) (any, *tools.Error) {
	if a.reload == nil {
		return nil, tools.Errorf(tools.SystemError, "toold is still starting").WithCode(tools.CodeDraining).WithRetryAfter(time.Second)
	}
	res, err := a.reload.Reload(ctx, "request", who, caller, requestID)
	if err != nil {
		return nil, reloadError(err)
	}
	return res, nil
}

// reloadError is how a refused reload is told to whoever asked.
func reloadError(err error) *tools.Error {
	var rn *restartNeeded
	if errors.As(err, &rn) {
		return tools.Errorf(tools.ValidationError, "%s", rn.Error()).WithCode(tools.CodeRestartNeeded).
			WithSuggestion("restart toold to apply them, or undo them in the file and reload again")
	}
	return tools.Errorf(tools.ValidationError, "the configuration was refused; the old one keeps serving: %v", err).
		WithCode(tools.CodeInvalidConfig).WithSuggestion("toold -check-config FILE lists every problem; fix them and reload again")
}

// startReloads reloads on SIGHUP, on a change of the file (-watch) and on
// a request published on the store (toold reload); stop ends them.
func (a *app) startReloads(ctx context.Context) (stop func(), err error) {
	r := a.reload
	if r == nil {
		return func() {}, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	stops := []func(){cancel}
	stopAll := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	stops = append(stops, func() { signal.Stop(hup) })
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				_, _ = r.Reload(ctx, "sighup", nil, "", "")
			}
		}
	}()
	if r.watch {
		w, err := r.watchFile(ctx)
		if err != nil {
			stopAll()
			return nil, err
		}
		stops = append(stops, func() { _ = w.Close() })
	}
	if a.store != nil {
		sub, err := a.store.Conn().Subscribe(ReloadSubject, func(m *nats.Msg) {
			go func() { _, _ = r.Reload(ctx, "toold reload", nil, "toold reload", string(m.Data)) }()
		})
		if err != nil {
			stopAll()
			return nil, fmt.Errorf("listening for reload requests: %w", err)
		}
		stops = append(stops, func() { _ = sub.Unsubscribe() })
	}
	return stopAll, nil
}

// watchFile reloads when the configuration file changes. It watches the
// file's directory, not the file: editors replace the file, and a
// Kubernetes ConfigMap swaps a symlink beside it; any event naming the
// file, or the ConfigMap's ..data link, counts. Events are debounced.
func (r *reloader) watchFile(ctx context.Context) (*fsnotify.Watcher, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("-watch: %w", err)
	}
	dir, base := filepath.Split(r.path)
	if dir == "" {
		dir = "."
	}
	if err := w.Add(dir); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("-watch: %w", err)
	}
	go func() {
		var t *time.Timer
		var fire <-chan time.Time
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if name := filepath.Base(ev.Name); name != base && name != "..data" {
					continue
				}
				if t == nil {
					t = time.NewTimer(watchDebounce)
				} else {
					t.Reset(watchDebounce)
				}
				fire = t.C
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				r.a.log.Warn("-watch: watching the configuration file", zap.Error(err))
			case <-fire:
				fire = nil
				_, _ = r.Reload(ctx, "watch", nil, "", "")
			}
		}
	}()
	return w, nil
}

const reloadUsage = `Usage: toold reload [-config FILE] [-state-dir DIR] [-nats-url URL]

Asks every replica on the state store to read its configuration file again
(each its own). A replica refusing its file logs why and keeps serving.`

// runReload is toold reload: one request on the store, for every replica.
func runReload(ctx context.Context, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("toold reload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, reloadUsage) }
	o := &options{set: map[string]bool{}}
	storeFlags(fs, o)
	if err := envDefaults(fs, o, lookupEnv); err != nil {
		fmt.Fprintln(stderr, "toold:", err)
		return exitCode(2)
	}
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		fs.Usage()
		return exitCode(2)
	}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	cfg, err := loadConfig(o, lookupEnv)
	if err != nil {
		fmt.Fprintf(stderr, "toold: the configuration has problems:\n%v\n", err)
		return exitCode(2)
	}
	id := "reload_" + hex.EncodeToString(randomBytes(8))
	err = withStore(ctx, cfg, func(ctx context.Context, st *state.Store) error {
		if err := st.Conn().Publish(ReloadSubject, []byte(id)); err != nil {
			return err
		}
		return st.Conn().FlushWithContext(ctx)
	})
	if err != nil {
		fmt.Fprintln(stderr, "toold reload:", err)
		return exitCode(1)
	}
	fmt.Fprintf(stdout, "reload requested (%s): every replica on the store reads its file again; their logs and toold_config_reloads_total say how it went\n", id)
	return nil
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}
