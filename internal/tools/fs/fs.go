// Package fs provides toold's built-in file tools: read_file, list_files,
// grep, write_file and edit_file. Every path a model supplies is checked by
// resolvePath and then used only through one os.Root, so no tool can read or
// write a byte outside the workspace, whatever the path or the symlinks in it.
// write_file and edit_file also refuse the files other tools execute (.git,
// and what command tools list in executes), see protect.go.
//
// The package is named fs because the brief asks for internal/tools/fs; the
// standard io/fs is imported as iofs throughout to avoid the clash.
package fs

import (
	"fmt"
	iofs "io/fs"
	"os"
	"slices"
	"sync"

	"github.com/toold/toold/internal/ospath"
	"github.com/toold/toold/internal/tools"
)

// Options bound what the tools read, return and write. Zero (or negative)
// fields take the documented defaults.
type Options struct {
	// MaxReadBytes is how many bytes of numbered content read_file returns
	// per file (default 256 KiB).
	MaxReadBytes int
	// MaxTotalReadBytes is how many bytes of content one read_file call
	// returns over all its files (default 512 KiB), so a many-file read
	// stays under the output sanitizer's 1 MiB cap with JSON escaping.
	MaxTotalReadBytes int
	// MaxFileBytes is the largest file read_file, grep and edit_file open,
	// and the largest file write_file will replace (default 16 MiB).
	MaxFileBytes int64
	// MaxEntries caps list_files (default 1000).
	MaxEntries int
	// MaxMatches caps grep (default 200).
	MaxMatches int
	// MaxWriteBytes caps the content write_file and edit_file may produce
	// (default 4 MiB).
	MaxWriteBytes int
	// Protected are the files, besides .git, that write_file and edit_file
	// refuse: those a declared tool executes or reads as configuration
	// (see protect.go).
	Protected []Protected
	// AllowProtected lets write_file and edit_file change protected files,
	// .git included; every call of the two then needs confirmation.
	AllowProtected bool
	// Redactor, when set, makes a LineRedactor for each file the file
	// tools read: grep and read_file match, window, cut and return the
	// redacted lines, edit_file never matches a secret, and a file's
	// sha256 is of its redacted text (see version), so repeated calls
	// cannot rebuild a secret from which guesses match and no answer
	// depends on a secret's bytes. toold sets it to the output
	// sanitizer's (sanitize.NewLineRedactor).
	Redactor func() LineRedactor
}

// LineRedactor masks the secrets of a file read in blocks of whole lines,
// in order (a private key block spans lines and blocks). Lines keeps
// every line break; it may return its argument or a buffer valid until
// the next call.
type LineRedactor interface {
	Lines(text []byte) []byte
}

func (o Options) withDefaults() Options {
	if o.MaxReadBytes <= 0 {
		o.MaxReadBytes = 256 << 10
	}
	if o.MaxTotalReadBytes <= 0 {
		o.MaxTotalReadBytes = 512 << 10
	}
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = 16 << 20
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = 1000
	}
	if o.MaxMatches <= 0 {
		o.MaxMatches = 200
	}
	if o.MaxWriteBytes <= 0 {
		o.MaxWriteBytes = 4 << 20
	}
	return o
}

// Workspace is one directory tree the file tools are confined to. It is safe
// for concurrent use; Close it when the tools are no longer served.
type Workspace struct {
	root  *os.Root
	fsys  iofs.FS // root.FS(): the confined view list_files and grep walk
	opts  Options
	locks pathLocks
	// protect is the set of files a write must not change (protect.go).
	protect *protection
	tools   []tools.Tool
}

// New opens workspace as an os.Root. It fails when workspace is not an
// existing directory.
func New(workspace string, opts Options) (*Workspace, error) {
	info, err := os.Stat(workspace)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("workspace %s is not a directory", workspace)
	}
	protect, err := newProtection(ospath.Host(), opts.Protected, opts.AllowProtected)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(workspace)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	w := &Workspace{root: root, fsys: root.FS(), opts: opts.withDefaults(), protect: protect}
	w.locks.m = map[string]*pathLock{}
	w.tools = []tools.Tool{w.readFileTool(), w.listFilesTool(), w.grepTool(), w.writeFileTool(), w.editFileTool()}
	return w, nil
}

// Close releases the workspace's root directory handle.
func (w *Workspace) Close() error { return w.root.Close() }

// Tools returns all five tools, in the order read_file, list_files, grep,
// write_file, edit_file. Enabling the writing ones is the caller's decision.
func (w *Workspace) Tools() []tools.Tool { return slices.Clone(w.tools) }

// ReadOnlyTools returns read_file, list_files and grep.
func (w *Workspace) ReadOnlyTools() []tools.Tool { return slices.Clone(w.tools[:3]) }

// pathLocks serializes toold's own writers to one file, so the hash check
// and the rename that follows are atomic with respect to each other. Writers
// outside toold are not locked out; the hash check catches them instead (up
// to the short window between the check and the rename).
type pathLocks struct {
	mu sync.Mutex
	m  map[string]*pathLock
}

type pathLock struct {
	mu   sync.Mutex
	refs int
}

// lock takes the lock for key and returns its release. Entries are counted
// and dropped when unused so the map does not grow with every path written.
func (l *pathLocks) lock(key string) (unlock func()) {
	l.mu.Lock()
	pl := l.m[key]
	if pl == nil {
		pl = &pathLock{}
		l.m[key] = pl
	}
	pl.refs++
	l.mu.Unlock()
	pl.mu.Lock()
	return func() {
		pl.mu.Unlock()
		l.mu.Lock()
		if pl.refs--; pl.refs == 0 {
			delete(l.m, key)
		}
		l.mu.Unlock()
	}
}
