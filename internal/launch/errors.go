package launch

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// ErrorKind says what went wrong with a start, so that a caller can tell
// its own users what to do (a command tool answers a typed tool error).
type ErrorKind int

// The kinds of Error.
const (
	// NotFound: the program is not there (not on the sandbox's PATH, or
	// gone since it was found).
	NotFound ErrorKind = iota + 1
	// Permission: the program, or the working directory, cannot be reached
	// by the uid programs run as.
	Permission
	// Closed: the Launcher is closed (toold is shutting down).
	Closed
	// Retired: a launcher thread failed and was stopped; programs of its
	// containment need toold restarted.
	Retired
	// Outside: a working directory is not inside the workspace.
	Outside
	// NoDirectory: a working directory does not exist or is not one.
	NoDirectory
)

// Error is a failure to start a program that its caller can explain.
type Error struct {
	Kind ErrorKind
	// Msg says what happened, in words fit for the one who asked.
	Msg string
	// Hint, when set, says what the one who asked can change.
	Hint string
	Err  error
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Err }

// Is lets errors.Is(err, ErrNotFound) hold for a NotFound Error.
func (e *Error) Is(target error) bool { return target == ErrNotFound && e.Kind == NotFound }

// ErrNotFound is what an Error of kind NotFound is (errors.Is); its message
// says where the program was looked for.
var ErrNotFound = errors.New("program not found")

// ErrUnavailable is what a sandbox's error is (errors.Is) when this machine
// cannot provide its containment mode: not built for this OS, not
// installed (bwrap), refused by the kernel (namespaces), or auto finding
// none. A configuration mistake (an unknown mode, a relative path) is not.
var ErrUnavailable = errors.New("containment not available here")

// unavailableError is a containment mode this machine cannot provide.
type unavailableError struct {
	mode Mode
	err  error
}

func (e *unavailableError) Error() string {
	return "containment " + string(e.mode) + ": " + e.err.Error()
}
func (e *unavailableError) Unwrap() []error { return []error{e.err, ErrUnavailable} }

// errClosed is what a closed launcher thread answers.
var errClosed = errors.New("command tools are closed")

// errRetired is what a launcher whose thread was retired answers.
var errRetired = errors.New("the command launcher's thread was retired")

// startError classifies a failed start.
func startError(program string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &Error{Kind: NotFound, Msg: fmt.Sprintf("program %s was not found", program), Err: err}
	case errors.Is(err, fs.ErrPermission):
		// The kernel says EACCES both for the program and for the working
		// directory; under a dropped uid the directory is the usual cause.
		return &Error{Kind: Permission, Msg: fmt.Sprintf("program %s could not be started: permission denied", program), Err: err}
	case errors.Is(err, errClosed):
		return &Error{Kind: Closed, Msg: "toold is shutting down", Err: err}
	case errors.Is(err, errRetired):
		return &Error{Kind: Retired, Msg: "the command sandbox failed and was stopped; command tools need toold restarted", Err: err}
	}
	return fmt.Errorf("starting %s: %w", program, err)
}

// unsupported is the refusal, on the OS goos, of a mode it does not
// provide (its own are have): never a silent none, and the way out named.
func unsupported(goos string, want Mode, have []Mode) error {
	own := make([]string, len(have))
	for i, m := range have {
		own[i] = string(m)
	}
	return fmt.Errorf("containment %s is not available on %s (its modes: %s; namespaces and bwrap are Linux's, "+
		"seatbelt macOS's, job Windows's): write one of these, or `containment: none` to run programs without isolation "+
		"(every call then says \"containment: none (not isolated)\")", want, goos, strings.Join(own, ", "))
}
