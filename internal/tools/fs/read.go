package fs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/toold/toold/internal/tools"
)

type readArgs struct {
	Paths  []string `json:"paths" desc:"Files to read, relative to the workspace root (1 to 20), for example [\"src/main.go\"]." validate:"min=1,max=20,dive,min=1"`
	Offset int      `json:"offset,omitempty" default:"1" desc:"1-based number of the first line to return from each file." validate:"omitempty,min=1"`
	Limit  int      `json:"limit,omitempty" default:"0" desc:"Most lines to return per file; 0 returns every line up to the size cap." validate:"omitempty,min=0"`
}

type readResult struct {
	Files         []fileContent `json:"files" desc:"The files read, in the order asked."`
	Errors        []pathError   `json:"errors,omitempty" desc:"Paths that could not be read, with the reason."`
	FilesRead     int           `json:"files_read" desc:"How many files were read."`
	TokenEstimate int           `json:"token_estimate" desc:"Approximate tokens of all content returned."`
}

type fileContent struct {
	Path          string `json:"path" desc:"The file, relative to the workspace root."`
	Content       string `json:"content" desc:"The lines shown, numbered like cat -n: number, tab, text, newline."`
	StartLine     int    `json:"start_line" desc:"First line shown (0 when none)."`
	EndLine       int    `json:"end_line" desc:"Last line shown (0 when none)."`
	TotalLines    int    `json:"total_lines" desc:"Lines in the whole file."`
	Truncated     bool   `json:"truncated" desc:"More lines follow end_line than were shown (limit or size cap)."`
	Note          string `json:"note,omitempty" desc:"Why not everything was shown and how to read on."`
	SizeBytes     int64  `json:"size_bytes" desc:"Size of the whole file."`
	SHA256        string `json:"sha256" desc:"Hex SHA-256 of the whole file as toold shows it (of its bytes, unless secrets in it are masked: then of the masked text); write_file and edit_file require it."`
	TokenEstimate int    `json:"token_estimate" desc:"Approximate tokens of content."`
}

// pathError is one path's failure in a multi-path call.
type pathError struct {
	Path       string     `json:"path" desc:"The path as resolved."`
	Type       tools.Kind `json:"type" desc:"Error kind, as in the envelope: user_error, permission_error, ..."`
	Code       tools.Code `json:"code,omitempty" desc:"Machine-readable reason, such as not_found or binary_file."`
	Message    string     `json:"message" desc:"What went wrong."`
	Suggestion string     `json:"suggestion,omitempty" desc:"What to do about it."`
}

func (w *Workspace) readFileTool() tools.Tool {
	return tools.Typed(tools.Spec{
		Name:     "read_file",
		Title:    "Read files",
		Category: tools.Direct,
		Effects:  tools.Effects{ReadOnly: true, Idempotent: true},
		Description: "Read one or more text files from the workspace with numbered lines, " +
			"and the SHA-256 that write_file and edit_file require.",
		Instructions: "Use read_file before answering questions about a file or changing it. " +
			"Pass several paths at once to read related files in one call. For a large file read a slice " +
			"with offset and limit (in lines); when truncated is true the note says where to continue. " +
			"Lines are numbered like cat -n (number, tab, text); the numbers are not part of the file, so " +
			"leave them out of old_string in edit_file. Keep each file's sha256: edit_file and write_file " +
			"need it to prove you saw the current content. Binary files are refused. If you do not know the " +
			"exact path, use list_files or grep first.",
		Returns: "files: per file read, path, content (numbered lines), start_line and end_line (the lines " +
			"shown), total_lines, truncated and a note when not everything was shown, size_bytes, sha256 of the " +
			"whole file and token_estimate. errors: paths that could not be read (type, code, message, " +
			"suggestion). The call itself fails only when no file could be read or a path was refused for " +
			"security. files_read and token_estimate sum up.",
		Examples: []tools.Example{
			{Description: "read a whole file", Arguments: []byte(`{"paths":["README.md"]}`)},
			{Description: "read lines 100-149 of two files", Arguments: []byte(`{"paths":["src/main.go","src/util.go"],"offset":100,"limit":50}`)},
		},
	}, w.readFiles)
}

// readFiles reads each path on its own: one missing file is reported in
// errors without losing the others. A security refusal fails the whole call,
// so a probing model gets nothing back from the rest of that request.
func (w *Workspace) readFiles(ctx context.Context, call *tools.Call, in readArgs) (readResult, error) {
	rels := make([]string, 0, len(in.Paths))
	for _, p := range in.Paths {
		rel, err := resolvePath(p)
		if err != nil {
			return readResult{}, err
		}
		if !slices.Contains(rels, rel) {
			rels = append(rels, rel)
		}
	}
	res := readResult{Files: make([]fileContent, 0, len(rels))}
	var first *tools.Error
	left := w.opts.MaxTotalReadBytes
	for _, rel := range rels {
		if err := ctx.Err(); err != nil {
			return readResult{}, err
		}
		var c fileContent
		var err error
		spent := left <= 0
		if !spent {
			c, err = w.readOne(rel, max(in.Offset, 1), in.Limit, min(left, w.opts.MaxReadBytes))
			left -= len(c.Content)
			spent = err == nil && c.Truncated && c.StartLine == 0 // not one line fit in what was left
		}
		if spent {
			err = tools.NewUserError("%s was not read: this call already returned its limit of %d bytes", show(rel), w.opts.MaxTotalReadBytes).
				WithCode(tools.CodeReadBudget).WithSuggestion("read the remaining files in another call")
		}
		if err != nil {
			te, ok := tools.AsError(err)
			if !ok || te.Kind == tools.SecurityError {
				return readResult{}, err
			}
			first = cmp.Or(first, te)
			res.Errors = append(res.Errors, pathError{rel, te.Kind, te.Code, te.Message, te.Suggestion})
			continue
		}
		if w.opts.Redactor != nil {
			countMarkers(call, c.Content)
		}
		res.Files = append(res.Files, c)
		res.FilesRead++
		res.TokenEstimate += c.TokenEstimate
	}
	if res.FilesRead == 0 {
		return readResult{}, allFailed(first, res.Errors)
	}
	return res, nil
}

// allFailed is the error of a call that read nothing: the first failure,
// with the others summed up so the model sees every path's problem.
func allFailed(first *tools.Error, errs []pathError) error {
	if len(errs) == 1 {
		return first
	}
	e := *first
	var others []string
	for _, pe := range errs[1:] {
		others = append(others, fmt.Sprintf("%q: %s", pe.Path, pe.Message))
	}
	e.Message += fmt.Sprintf(" (and %d more path(s) failed: %s)", len(others), strings.Join(others, "; "))
	return &e
}

// readOne streams one file: every byte goes through the hash, only the
// requested lines within the byte cap are kept. When toold masks secrets,
// every line goes through the line redactor first, and what read_file
// shows and hashes (see version) is the masked text: a window of it from
// an offset, or cut by a limit or the cap, holds no piece of a secret
// (the output sanitizer, which sees only what is shown, recognizes every
// secret of a whole file, but not the body of a private key whose header
// lies before the window, nor a token cut at the cap), and a whole file
// shows the same lines as a window would, one marker per masked line, so
// its line numbers stay those of the file.
func (w *Workspace) readOne(rel string, offset, limit, budget int) (fileContent, error) {
	f, info, err := w.openRegular(rel)
	if err != nil {
		return fileContent{}, err
	}
	defer f.Close()
	if info.Size() > w.opts.MaxFileBytes {
		return fileContent{}, w.tooLarge(rel, info.Size())
	}
	lr := &io.LimitedReader{R: f, N: w.opts.MaxFileBytes + 1} // the file may grow after fstat
	win := &window{offset: offset, limit: limit, budget: budget,
		out: make([]byte, 0, min(int(info.Size())+int(info.Size())/4+64, budget))}
	// One pass: every byte to the hash, every line through the line
	// redactor (when toold masks secrets) to the sha256 of the masked text
	// and to the window.
	v := w.newVersioner(win.keep)
	total, err := scanLines(io.TeeReader(lr, v), bufSize(info.Size()), v.lines.add)
	if err == nil {
		v.lines.flush()
	}
	switch {
	case errors.Is(err, errBinary):
		return fileContent{}, tools.NewUserError("%s looks like a binary file (NUL bytes or invalid UTF-8); read_file returns text only", show(rel)).
			WithCode(tools.CodeBinaryFile).WithSuggestion("pick a text file; list_files shows sizes, and grep skips binary files")
	case err != nil:
		return fileContent{}, fmt.Errorf("read %s: %w", rel, err)
	case lr.N == 0:
		return fileContent{}, w.tooLarge(rel, w.opts.MaxFileBytes+1)
	}
	c := win.c
	c.Path = rel
	c.Content = string(win.out)
	c.TotalLines = total
	c.SizeBytes = w.opts.MaxFileBytes + 1 - lr.N
	c.SHA256 = v.sum()
	c.TokenEstimate = estimateTokens(len(c.Content))
	notes := win.notes
	if note := readNote(c, offset); note != "" {
		notes = append(notes, note)
	}
	c.Note = strings.Join(notes, "; ")
	return c, nil
}

// window keeps the lines read_file shows: from offset, at most limit
// lines (0: no limit), within budget bytes once numbered.
type window struct {
	offset, limit, budget int
	c                     fileContent // StartLine, EndLine, Truncated
	out                   []byte
	notes                 []string
}

func (w *window) keep(n int, line []byte) bool {
	c := &w.c
	switch {
	case n < w.offset || c.Truncated:
	case w.limit > 0 && n-w.offset >= w.limit:
		c.Truncated = true
	case len(w.out)+numberedLen(n, len(line)) > w.budget:
		c.Truncated = true
		if room := w.budget - numberedLen(n, 0); c.StartLine == 0 && room > 0 {
			// A single huge line (minified code): show its start rather than nothing.
			w.out = appendNumbered(w.out, n, tools.CutUTF8(line, room))
			c.StartLine, c.EndLine = n, n
			w.notes = append(w.notes, fmt.Sprintf("line %d is %d bytes, more than the %d-byte read cap; only its start is shown", n, len(line), w.budget))
		}
	default:
		w.out = appendNumbered(w.out, n, line)
		c.StartLine = cmp.Or(c.StartLine, n)
		c.EndLine = n
	}
	return true
}

// readNote tells the model why it sees less than the whole file.
func readNote(c fileContent, offset int) string {
	switch {
	case c.TotalLines == 0:
		return "the file is empty"
	case offset > c.TotalLines:
		return fmt.Sprintf("offset %d is past the end: the file has %d lines", offset, c.TotalLines)
	case c.Truncated:
		return fmt.Sprintf("showing lines %d-%d of %d; to read on, call read_file with offset %d",
			c.StartLine, c.EndLine, c.TotalLines, c.EndLine+1)
	}
	return ""
}

// estimateTokens uses the common rule of thumb of ~4 bytes per token for
// English text and code under BPE tokenizers: cheap and deterministic, good
// enough for a model to budget its context, not an exact count.
func estimateTokens(bytes int) int { return (bytes + 3) / 4 }

// bufSize fits the line reader's buffer to small files (one allocation of
// the file's size) and bounds it for large ones; longer lines still work.
func bufSize(size int64) int { return int(min(max(size+1, 512), 64<<10)) }

func (w *Workspace) tooLarge(rel string, size int64) error {
	return tools.NewUserError("%s is %d bytes; the file tools open files of at most %d bytes", show(rel), size, w.opts.MaxFileBytes).
		WithCode(tools.CodeFileTooLarge).WithSuggestion("the file tools cannot open it; work with smaller files, or ask the operator to raise the limit")
}
