// Command search measures toold's tool search (internal/search) on an
// evaluation set: recall@1, @3, @5 and MRR per kind of query, beside a
// plain BM25 baseline, and, with -ablation, what each technique of the
// ranking brings. Run it with `make search-eval` (go run ./bench/search);
// docs/search.md has its figures.
//
// The set is testdata/catalog.txt and testdata/queries.txt by default, or
// any set in the JSON format (-set file.json; see docs/search.md).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"

	"github.com/toold/toold/bench/search/evalset"
	"github.com/toold/toold/internal/search"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "search:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("search", flag.ContinueOnError)
	dir := testdata()
	catalog := fs.String("catalog", filepath.Join(dir, "catalog.txt"), "the catalog, in the text format")
	queries := fs.String("queries", filepath.Join(dir, "queries.txt"), "the queries, in the text format")
	unseen := fs.String("unseen", filepath.Join(dir, "unseen.txt"), "a catalog of integrations held out whatever their names hash to (\"\" for none)")
	setFile := fs.String("set", "", "a set in the JSON format (instead of -catalog and -queries)")
	split := fs.String("split", "", "only the queries of this split (dev, holdout); all by default")
	ablation := fs.Bool("ablation", false, "also measure the ranking with each technique turned off")
	tuneFlag := fs.Bool("tune", false, "tune the ranking's weights on the dev split (and print them)")
	camel := fs.Bool("camel", false, "rename every tool to camelCase (github__listPullRequests), to measure name splitting")
	misses := fs.Bool("misses", false, "list the queries whose tool is not first (use on the dev split only)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var set *evalset.Set
	var err error
	if *setFile != "" {
		set, err = evalset.LoadJSON(*setFile)
	} else {
		var extra []string
		if *unseen != "" {
			extra = append(extra, *unseen)
		}
		set, err = evalset.LoadText(*catalog, *queries, extra...)
	}
	if err == nil {
		err = set.Check()
	}
	if err != nil {
		return err
	}
	if *camel {
		set.CamelCase()
	}
	if *tuneFlag {
		tune(out, set)
		return nil
	}
	qs := set.Queries
	if *split != "" {
		qs = slices.DeleteFunc(slices.Clone(qs), func(q evalset.Query) bool { return q.Split != *split })
	}
	fmt.Fprintf(out, "%d tools, %d queries (split %q)\n\n", len(set.Tools), len(qs), *split)
	ix := search.Build(set.Tools, search.DefaultOptions())
	ours := evalset.Evaluate(set, qs, ixRanker(ix))
	base := evalset.Evaluate(set, qs, newBM25(set.Tools).search)
	fmt.Fprintln(out, "ranker         kind          n    R@1    R@3    R@5    MRR")
	ours.Print(out, "toold")
	base.Print(out, "plain BM25")
	if *misses {
		ours.PrintMisses(out)
	}
	if *ablation {
		return printAblation(out, set, qs)
	}
	return nil
}

// testdata is the directory of the default set, beside this file when run
// from the repository root or from bench/search.
func testdata() string {
	for _, d := range []string{"bench/search/testdata", "testdata"} {
		if _, err := os.Stat(filepath.Join(d, "catalog.txt")); err == nil {
			return d
		}
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "testdata")
}

func ixRanker(ix *search.Index) evalset.Ranker {
	return func(q string, limit int) []search.Hit { return ix.Search(q, limit, nil) }
}
