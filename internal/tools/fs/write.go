package fs

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/toold/toold/internal/tools"
)

type writeArgs struct {
	Path           string `json:"path" desc:"File to write, relative to the workspace root." validate:"min=1"`
	Content        string `json:"content" desc:"The complete new content of the file (UTF-8 text); it replaces everything."`
	ExpectedSHA256 string `json:"expected_sha256,omitempty" desc:"Hex SHA-256 of the file's current content, as read_file returned it. Required when the file exists; leave it out to create a new file." validate:"omitempty,len=64,hexadecimal"`
	CreateDirs     bool   `json:"create_dirs,omitempty" desc:"Create missing parent directories."`
}

type writeResult struct {
	Path         string `json:"path" desc:"The file written, relative to the workspace root."`
	BytesWritten int    `json:"bytes_written" desc:"Size of the new content."`
	SHA256       string `json:"sha256" desc:"Hex SHA-256 of the new content; pass it to the next write or edit."`
	Created      bool   `json:"created" desc:"The file did not exist before."`
}

func (w *Workspace) writeFileTool() tools.Tool {
	return tools.Typed(tools.Spec{
		Name:         "write_file",
		Confirmation: w.writeConfirmation(),
		Title:        "Write a file",
		Effects:      tools.Effects{Destructive: true},
		Category:     tools.Direct,
		Description:  "Create a text file in the workspace, or replace a whole file whose current content you have read.",
		Instructions: "Use write_file to create a new file, or to rewrite most of an existing one; for a small " +
			"change prefer edit_file. To replace an existing file pass expected_sha256, the sha256 read_file " +
			"returned: if the file changed since, the write is refused with code conflict and you must read it " +
			"again. Leave expected_sha256 out only to create a file that does not exist yet. Set create_dirs to " +
			"create missing parent directories. The write is atomic: readers see the old or the new file, never " +
			"a mix, and the file keeps its permissions. Files other tools execute (anything under .git, and files the " +
			"operator protected, such as a Makefile a build tool runs) are refused with code protected_path: leave them to a person.",
		Returns: "path, bytes_written, sha256 of the new content (use it for the next write or edit), and " +
			"created (true for a new file).",
		Examples: []tools.Example{
			{Description: "create a new file and its directory", Arguments: []byte(`{"path":"notes/todo.md","content":"# TODO\n- write tests\n","create_dirs":true}`)},
			{Description: "replace a file read before", Arguments: []byte(`{"path":"README.md","content":"# Project\n","expected_sha256":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}`)},
		},
	}, w.writeFile)
}

func (w *Workspace) writeFile(ctx context.Context, _ *tools.Call, in writeArgs) (writeResult, error) {
	rel, err := w.writablePath(in.Path, len(in.Content))
	if err != nil {
		return writeResult{}, err
	}
	if dir := path.Dir(rel); in.CreateDirs && dir != "." {
		// MkdirAll goes through the root like every other call: a symlinked
		// parent pointing outside is refused, not created through.
		if err := w.root.MkdirAll(dir, 0o755); err != nil {
			if errors.Is(err, iofs.ErrExist) || errors.Is(err, syscall.ENOTDIR) {
				return writeResult{}, notADirectory(dir)
			}
			return writeResult{}, w.fsError(dir, err)
		}
	}
	unlock, err := w.lockFor(rel)
	if err != nil {
		return writeResult{}, err
	}
	defer unlock()
	cur, err := w.inspect(rel, false)
	if err != nil {
		return writeResult{}, err
	}
	if err := checkExpected(rel, cur, in.ExpectedSHA256); err != nil {
		return writeResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return writeResult{}, err
	}
	content := []byte(in.Content)
	if err := w.replaceFile(rel, content, cur.perm); err != nil {
		return writeResult{}, err
	}
	return writeResult{Path: rel, BytesWritten: len(content), SHA256: w.versionOf(content), Created: !cur.exists}, nil
}

// writablePath resolves a path to write and checks the content fits.
func (w *Workspace) writablePath(p string, size int) (string, error) {
	rel, err := resolvePath(p)
	if err != nil {
		return "", err
	}
	if rel == "." {
		return "", checkRegular(p, iofs.ModeDir)
	}
	if err := w.checkProtected(rel); err != nil {
		return "", err
	}
	if size > w.opts.MaxWriteBytes {
		return "", tools.NewUserError("the new content is %d bytes; the limit is %d", size, w.opts.MaxWriteBytes).
			WithCode(tools.CodeContentTooLarge).WithSuggestion("split the content over several smaller files")
	}
	return rel, nil
}

// writeConfirmation: the writing tools need a person's confirmation when
// they may change files other tools execute (fs.allow_protected).
func (w *Workspace) writeConfirmation() tools.Confirmation {
	return tools.ConfirmedIf(w.protect.allow)
}

// lockFor takes the write lock of rel, keyed by its parent directory's
// identity where the platform offers one, so two spellings of one file
// through a symlinked directory share a lock. It also reports a missing
// parent directory, the usual reason a write cannot start.
func (w *Workspace) lockFor(rel string) (unlock func(), err error) {
	dir, base := path.Split(rel)
	dir = path.Clean("./" + dir)
	info, err := w.root.Stat(dir)
	switch {
	case errors.Is(err, iofs.ErrNotExist):
		return nil, tools.NewUserError("the directory %s does not exist", show(dir)).WithCode(tools.CodeNotFound).
			WithSuggestion("set create_dirs to true to create it, or check the path with list_files")
	case errors.Is(err, syscall.ENOTDIR) || err == nil && !info.IsDir():
		return nil, notADirectory(dir)
	case err != nil:
		return nil, w.fsError(dir, err)
	}
	key := rel
	if id, ok := dirKey(info); ok {
		key = id + "/" + base
	}
	return w.locks.lock(key), nil
}

func notADirectory(dir string) error {
	return tools.NewUserError("%s is not a directory: it, or a directory above it, is a file", show(dir)).
		WithCode(tools.CodeNotADirectory).WithSuggestion("choose another path; list_files shows what exists")
}

// target is what a write finds at its path before it replaces it.
type target struct {
	exists bool
	sum    string      // the current content's sha256 (see version)
	perm   os.FileMode // kept across the replacement
	data   []byte      // the content, when asked for
}

// inspect reads the current state of rel. A symlink, directory or special
// file is refused: replacing a symlink would silently turn it into a file.
// The content is read through openRegular, so the checked descriptor is the
// one hashed.
func (w *Workspace) inspect(rel string, keep bool) (target, error) {
	info, err := w.root.Lstat(rel)
	if errors.Is(err, iofs.ErrNotExist) {
		return target{perm: 0o644}, nil
	}
	if err != nil {
		return target{}, w.fsError(rel, err)
	}
	if info.Mode()&iofs.ModeSymlink != 0 {
		// Say so when the link leads out: that is a security refusal, not
		// just a link the model should resolve itself.
		if _, err := w.root.Stat(rel); isEscape(err) {
			return target{}, w.fsError(rel, err)
		}
	}
	if err := checkRegular(rel, info.Mode()); err != nil {
		return target{}, err
	}
	f, info, err := w.openRegular(rel)
	if err != nil {
		return target{}, err
	}
	defer f.Close()
	// Larger files could not have been read (read_file refuses them), so no
	// caller can hold their hash.
	if info.Size() > w.opts.MaxFileBytes {
		return target{}, w.tooLarge(rel, info.Size())
	}
	t := target{exists: true, perm: info.Mode().Perm()} // Perm drops setuid/setgid on purpose
	lr := &io.LimitedReader{R: f, N: w.opts.MaxFileBytes + 1}
	if keep {
		if t.data, err = io.ReadAll(lr); err == nil && lr.N > 0 {
			t.sum = w.versionOf(t.data)
		}
	} else {
		t.sum, err = w.version(lr, info.Size())
	}
	if err != nil {
		return target{}, fmt.Errorf("read %s: %w", rel, err)
	}
	if lr.N == 0 {
		return target{}, w.tooLarge(rel, w.opts.MaxFileBytes+1)
	}
	return t, nil
}

// checkExpected is the optimistic-concurrency check: a model may replace
// only the content it has seen.
func checkExpected(rel string, cur target, expected string) error {
	switch {
	case cur.exists && expected == "":
		return conflict("%s already exists; replacing it needs expected_sha256, the sha256 read_file returned for it", rel).
			WithSuggestion("call read_file on it first and pass its sha256 as expected_sha256 (for a small change, use edit_file)")
	case cur.exists && !strings.EqualFold(cur.sum, expected):
		return conflict("%s changed since you read it: its content no longer has SHA-256 %s", rel, expected).
			WithSuggestion("read it again with read_file, apply your change to the current content, and pass the new sha256")
	case !cur.exists && expected != "":
		return conflict("%s does not exist, but expected_sha256 was given: it was deleted or moved since you read it", rel).
			WithSuggestion("check the path with list_files; to create the file anew, leave out expected_sha256")
	}
	return nil
}

func conflict(format, rel string, args ...any) *tools.Error {
	return tools.NewUserError(format, append([]any{show(rel)}, args...)...).WithCode(tools.CodeConflict)
}

// replaceFile writes content to a new temporary file beside rel, syncs it,
// and renames it over rel, so readers see the old or the new file, never a
// mix, and a crash leaves at worst a stray ".toold-*.tmp". The temporary file
// is created through the root with O_EXCL, so it can neither follow a planted
// symlink nor land outside the workspace.
func (w *Workspace) replaceFile(rel string, content []byte, perm os.FileMode) error {
	dir := path.Dir(rel)
	tmp, f, err := w.createTemp(dir)
	if err != nil {
		return err
	}
	err = writeSynced(f, content, perm)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close temporary file: %w", cerr)
	}
	if err == nil {
		if rerr := w.root.Rename(tmp, rel); rerr != nil {
			err = w.fsError(rel, rerr)
		}
	}
	if err != nil {
		w.root.Remove(tmp)
		return err
	}
	w.syncDir(dir)
	return nil
}

// writeSynced writes content and makes it durable before the rename
// publishes it. fchmod on the descriptor sets exact bits whatever the umask,
// with no path lookup a swapped symlink could redirect.
func writeSynced(f *os.File, content []byte, perm os.FileMode) error {
	if _, err := f.Write(content); err != nil {
		return fmt.Errorf("write temporary file: %w", err)
	}
	if err := f.Chmod(perm); err != nil {
		return fmt.Errorf("chmod temporary file: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync temporary file: %w", err)
	}
	return nil
}

func (w *Workspace) createTemp(dir string) (string, *os.File, error) {
	for range 5 {
		name := path.Join(dir, ".toold-"+rand.Text()+".tmp")
		f, err := w.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, iofs.ErrExist) {
			continue
		}
		if err != nil {
			return "", nil, w.fsError(dir, err)
		}
		return name, f, nil
	}
	return "", nil, fmt.Errorf("no free temporary name in %s", dir)
}

// syncDir makes the rename durable. It is best effort: some file systems
// refuse to sync a directory, and the data itself is already synced.
func (w *Workspace) syncDir(dir string) {
	if d, err := w.root.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
