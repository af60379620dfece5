package fs

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/toold/toold/internal/ospath"
	"github.com/toold/toold/internal/suggest"
	"github.com/toold/toold/internal/tools"
)

// Linux's PATH_MAX and NAME_MAX: a longer path cannot name a real file, and
// refusing it up front keeps hostile input out of syscalls and messages.
const (
	maxPathBytes      = 4096
	maxComponentBytes = 255
)

const outsideHint = "paths are relative to the workspace root: write \"src/main.go\", not \"/src/main.go\" or \"../src/main.go\"; list_files shows what exists"

// resolvePath turns a path a model supplied into the cleaned, slash-separated
// workspace-relative name every os.Root call receives. It is lexical only: it
// refuses what can never be inside the workspace, and os.Root enforces the
// rest (symlinks, races) at the moment of access. Every tool calls it.
func resolvePath(p string) (string, error) { return resolvePathOn(ospath.Host(), p) }

// resolvePathOn is resolvePath by plat's rules (the tests run every
// platform's): on Windows a backslash separates names, a drive letter, a
// UNC share or a \\?\ path is absolute, and a name with ':' (an alternate
// data stream, .git::$INDEX_ALLOCATION) or a device name (CON, NUL) is no
// file name; on Linux and macOS all of these are plain names.
func resolvePathOn(plat ospath.Platform, p string) (string, error) {
	switch {
	case strings.IndexByte(p, 0) >= 0:
		return "", refuse(tools.CodeNulByte, "the path contains a NUL byte, which no file name can hold",
			"remove the \\x00 character from the path")
	case len(p) > maxPathBytes:
		return "", refuse(tools.CodePathTooLong, fmt.Sprintf("the path is %d bytes long; the limit is %d", len(p), maxPathBytes),
			"use a shorter path relative to the workspace root")
	case p == "":
		return "", tools.NewUserError("the path is empty").WithCode(tools.CodeEmptyPath).
			WithSuggestion("name a file relative to the workspace root, such as \"README.md\"")
	}
	if n := longestComponent(plat, p); n > maxComponentBytes {
		return "", refuse(tools.CodePathTooLong, fmt.Sprintf("a component of the path is %d bytes long; the limit is %d", n, maxComponentBytes),
			"use shorter file and directory names")
	}
	clean, err := plat.Local(p)
	switch {
	case errors.Is(err, ospath.ErrAbsolute):
		return "", refuse(tools.CodeAbsolutePath, fmt.Sprintf("%s is an absolute path; only paths relative to the workspace root are accepted", show(p)),
			outsideHint)
	case errors.Is(err, ospath.ErrEscape):
		return "", refuse(tools.CodePathEscape, fmt.Sprintf("%s leaves the workspace: '..' cannot climb above the workspace root", show(p)),
			outsideHint)
	case errors.Is(err, ospath.ErrName):
		return "", refuse(tools.CodeInvalidName, fmt.Sprintf("%s is not a file name on %s: ':' names an alternate data stream or a drive, "+
			"and CON, PRN, AUX, NUL, COM1-9 and LPT1-9 are devices", show(p), plat.OS), "use plain file names")
	}
	return clean, err
}

// longestComponent is the length of p's longest name between separators,
// found without allocating: resolvePath runs on every call.
func longestComponent(plat ospath.Platform, p string) int {
	longest, start := 0, 0
	for i := 0; i <= len(p); i++ {
		if i == len(p) || plat.IsSep(p[i]) {
			longest = max(longest, i-start)
			start = i + 1
		}
	}
	return longest
}

func refuse(code tools.Code, msg, suggestion string) *tools.Error {
	e := tools.NewSecurityError("%s", msg).WithCode(code)
	e.Suggestion = suggestion
	return e
}

// show quotes a path for a message, shortened so a hostile 4 KiB path does
// not flood the model's context.
func show(p string) string {
	const keep = 120
	if len(p) > keep {
		return fmt.Sprintf("%q...", strings.ToValidUTF8(p[:keep], ""))
	}
	return fmt.Sprintf("%q", p)
}

// isEscape reports os.Root's refusal of a path that leaves the root, which
// after resolvePath can only come from a symlink. The os package does not
// export that error, so it is recognized by its text; the symlink tests fail
// loudly if a Go release changes it.
func isEscape(err error) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		if err.Error() == "path escapes from parent" {
			return true
		}
	}
	return false
}

// fsError turns an os.Root error about rel into an error the model can act
// on; anything unexpected stays untyped, so it is logged as a system error
// and its text (which names host paths) is never shown.
func (w *Workspace) fsError(rel string, err error) error {
	switch {
	case isEscape(err):
		return refuse(tools.CodeSymlinkEscape, fmt.Sprintf("%s goes through a symbolic link that points outside the workspace", show(rel)),
			"only files inside the workspace can be used; pick another path (list_files shows symlinks as kind \"symlink\")")
	case errors.Is(err, iofs.ErrNotExist):
		return w.notFound(rel)
	case errors.Is(err, syscall.ENOTDIR):
		return tools.NewUserError("%s does not exist: one of its parent directories is a file", show(rel)).
			WithCode(tools.CodeNotFound).WithSuggestion("use list_files to see which directories exist")
	case errors.Is(err, syscall.ELOOP):
		return tools.NewUserError("%s goes through too many symbolic links (a loop?)", show(rel)).
			WithCode(tools.CodeSymlinkLoop).WithSuggestion("use a path without the looping link")
	case errors.Is(err, syscall.ENAMETOOLONG):
		return refuse(tools.CodePathTooLong, fmt.Sprintf("%s is too long once its symbolic links are followed", show(rel)),
			"use a shorter path")
	case errors.Is(err, iofs.ErrPermission):
		return tools.NewPermissionError("the file system does not allow this on %s", show(rel)).
			WithCode(tools.CodePermissionDenied).Wrap(err)
	}
	return fmt.Errorf("%s: %w", rel, err)
}

// notFound reports a missing path, suggesting the closest names in its
// directory, since a model's usual mistake is a typo or a wrong extension.
func (w *Workspace) notFound(rel string) error {
	e := tools.NewUserError("%s does not exist in the workspace", show(rel)).WithCode(tools.CodeNotFound)
	near := w.nearest(rel)
	if len(near) == 0 {
		return e.WithSuggestion("use list_files to see which files exist; paths are relative to the workspace root")
	}
	for i, n := range near {
		near[i] = fmt.Sprintf("%q", n)
	}
	return e.WithSuggestion("did you mean %s? list_files shows what exists", strings.Join(near, " or "))
}

// nearest returns up to three names in rel's directory within a small edit
// distance of its base name. It reads a bounded number of entries so a huge
// directory cannot make an error slow.
func (w *Workspace) nearest(rel string) []string {
	dir, base := path.Split(rel)
	f, err := w.root.Open(path.Clean("./" + dir))
	if err != nil {
		return nil
	}
	defer f.Close()
	names, _ := f.Readdirnames(2000)
	lower := make([]string, len(names))
	byLower := map[string]string{}
	for i, n := range names {
		lower[i] = strings.ToLower(n)
		byLower[lower[i]] = n
	}
	var out []string
	for _, n := range suggest.Nearest(strings.ToLower(base), lower, max(2, len(base)/3), 3) {
		out = append(out, dir+byLower[n])
	}
	return out
}

// openRegular opens rel for reading and returns it only if it is a regular
// file. O_NONBLOCK keeps open(2) on a FIFO from waiting for a writer, and the
// type is checked on the opened descriptor (fstat), so swapping the name for a
// FIFO or device between a check and the open cannot fool it.
func (w *Workspace) openRegular(rel string) (*os.File, os.FileInfo, error) {
	f, err := w.root.OpenFile(rel, openReadFlags, 0)
	if err != nil {
		return nil, nil, w.fsError(rel, err)
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("stat %s: %w", rel, err)
	}
	if err := checkRegular(rel, info.Mode()); err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, info, nil
}

// checkRegular refuses what is not a regular file: a directory is a mistake
// the model can fix, anything else (FIFO, device, socket) is refused outright.
func checkRegular(rel string, mode iofs.FileMode) error {
	switch {
	case mode.IsRegular():
		return nil
	case mode.IsDir():
		return tools.NewUserError("%s is a directory, not a file", show(rel)).WithCode(tools.CodeIsDirectory).
			WithSuggestion("use list_files with patterns [%q] to see what it contains", path.Join(rel, "**"))
	case mode&iofs.ModeSymlink != 0:
		return tools.NewUserError("%s is a symbolic link; the file tools do not write through links", show(rel)).
			WithCode(tools.CodeIsSymlink).WithSuggestion("write to the file the link points to instead")
	}
	return refuse(tools.CodeNotRegularFile, fmt.Sprintf("%s is not a regular file (it is a %s)", show(rel), kindOf(mode)),
		"the file tools only read and write regular files")
}

// kindOf names a file mode for messages and list_files entries.
func kindOf(mode iofs.FileMode) string {
	switch t := mode.Type(); {
	case t == 0:
		return "file"
	case t&iofs.ModeDir != 0:
		return "dir"
	case t&iofs.ModeSymlink != 0:
		return "symlink"
	case t&iofs.ModeNamedPipe != 0:
		return "named pipe"
	case t&iofs.ModeDevice != 0:
		return "device"
	case t&iofs.ModeSocket != 0:
		return "socket"
	}
	return "other"
}
