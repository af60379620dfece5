package fs

import (
	"context"
	iofs "io/fs"

	"github.com/toold/toold/internal/tools"
)

type listArgs struct {
	Patterns   []string `json:"patterns,omitempty" default:"[\"**\"]" desc:"Glob patterns relative to the workspace root, doublestar syntax: * within a name, ** across directories, {a,b} alternatives. An entry is listed if it matches any pattern." validate:"omitempty,max=20,dive,min=1"`
	MaxEntries int      `json:"max_entries,omitempty" desc:"Most entries to return; defaults to, and is capped by, the server's limit (1000 unless configured)." validate:"omitempty,min=1"`
}

type listResult struct {
	Entries      []listEntry `json:"entries" desc:"Matching entries, sorted by path."`
	TotalMatched int         `json:"total_matched" desc:"How many entries matched, including those left out."`
	Truncated    bool        `json:"truncated" desc:"More entries matched than were returned."`
}

type listEntry struct {
	Path      string `json:"path" desc:"Relative to the workspace root."`
	Kind      string `json:"kind" desc:"file, dir, symlink or other." validate:"oneof=file dir symlink other"`
	SizeBytes int64  `json:"size_bytes" desc:"Size of a file; 0 for other kinds."`
}

func (w *Workspace) listFilesTool() tools.Tool {
	return tools.Typed(tools.Spec{
		Name:     "list_files",
		Title:    "List files",
		Category: tools.Direct,
		Effects:  tools.Effects{ReadOnly: true, Idempotent: true},
		Description: "List files and directories in the workspace that match glob patterns, " +
			"with their kind and size.",
		Instructions: "Use list_files to discover what exists before reading or editing, or to find files " +
			"by name. Patterns use doublestar syntax relative to the workspace root: \"**\" lists everything, " +
			"\"src/**/*.go\" every Go file under src, \"*.{md,txt}\" top-level docs, \"docs/*\" one directory " +
			"level. A plain \"*.go\" does not descend into directories; use \"**/*.go\". .git directories are " +
			"skipped unless a pattern names .git. Symbolic links are listed, not followed. When truncated is " +
			"true, narrow the patterns rather than raising max_entries. To search file contents, use grep.",
		Returns: "entries: path, kind (file, dir, symlink, other) and size_bytes, sorted by path component by " +
			"component (a directory's contents follow it) and de-duplicated across patterns; total_matched and " +
			"truncated tell whether entries were left out.",
		Examples: []tools.Example{
			{Description: "everything (up to the cap)", Arguments: []byte(`{}`)},
			{Description: "Go and Markdown files under src", Arguments: []byte(`{"patterns":["src/**/*.{go,md}"],"max_entries":200}`)},
		},
	}, w.listFiles)
}

func (w *Workspace) listFiles(ctx context.Context, _ *tools.Call, in listArgs) (listResult, error) {
	patterns := in.Patterns
	if len(patterns) == 0 {
		patterns = []string{"**"}
	}
	g, err := compileGlobs(patterns, "/patterns")
	if err != nil {
		return listResult{}, err
	}
	limit := w.opts.MaxEntries
	if in.MaxEntries > 0 {
		limit = min(in.MaxEntries, limit)
	}
	res := listResult{Entries: []listEntry{}}
	err = w.walk(ctx, g, func(p string, d iofs.DirEntry) error {
		res.TotalMatched++
		if len(res.Entries) >= limit {
			res.Truncated = true
			return nil // keep counting: total_matched tells the model how much it missed
		}
		e := listEntry{Path: p, Kind: listKind(d.Type())}
		if e.Kind == "file" {
			// root.Lstat, not d.Info(): Info stats a host path outside the
			// root's confinement.
			if info, err := w.root.Lstat(p); err == nil {
				e.SizeBytes = info.Size()
			}
		}
		res.Entries = append(res.Entries, e)
		return nil
	})
	if err != nil {
		return listResult{}, err
	}
	return res, nil
}

func listKind(t iofs.FileMode) string {
	switch {
	case t.IsRegular():
		return "file"
	case t.IsDir():
		return "dir"
	case t&iofs.ModeSymlink != 0:
		return "symlink"
	}
	return "other"
}
