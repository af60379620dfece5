// Command searchlib measures Bleve, the well-kept Go search library, on
// toold's search evaluation set, beside toold's own ranking
// (internal/search), in one run: the quality (recall@k, MRR) and the
// latency of a search over 10,000 tools. Bleve gets what a library offers
// out of the box: BM25 scoring, its English analyzer (stop words, Porter
// stemming) on the descriptions, the standard one on names, and the same
// field boosts as toold. It is its own module so Bleve never enters
// toold's go.mod:
//
//	cd bench/searchlib && go run .
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/standard"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search/query"

	"github.com/toold/toold/bench/search/evalset"
	"github.com/toold/toold/internal/search"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "searchlib:", err)
		os.Exit(1)
	}
}

func run() error {
	dir := filepath.Join("..", "search", "testdata")
	set, err := evalset.LoadText(filepath.Join(dir, "catalog.txt"), filepath.Join(dir, "queries.txt"), filepath.Join(dir, "unseen.txt"))
	if err != nil {
		return err
	}
	idx, err := bleveIndex(set.Tools)
	if err != nil {
		return err
	}
	fmt.Printf("%d tools, %d queries\n\nranker         kind          n    R@1    R@3    R@5    MRR\n", len(set.Tools), len(set.Queries))
	evalset.Evaluate(set, set.Queries, bleveRanker(idx)).Print(os.Stdout, "bleve BM25")
	ours := search.Build(set.Tools, search.DefaultOptions())
	evalset.Evaluate(set, set.Queries, func(q string, n int) []search.Hit { return ours.Search(q, n, nil) }).Print(os.Stdout, "toold")
	large := replicate(set.Tools, 10000)
	big, err := bleveIndex(large)
	if err != nil {
		return err
	}
	bigOurs := search.Build(large, search.DefaultOptions())
	fmt.Println("\nsearch over 10,000 tools, 2,000 queries each, alternately:")
	queries := make([]string, len(set.Queries))
	for i, q := range set.Queries {
		queries[i] = q.Text
	}
	for round := range 2 {
		p50, p99 := latency(queries, bleveRanker(big))
		fmt.Printf("  round %d  bleve BM25  p50 %6.3f ms  p99 %6.3f ms\n", round+1, p50, p99)
		p50, p99 = latency(queries, func(q string, n int) []search.Hit { return bigOurs.Search(q, n, nil) })
		fmt.Printf("  round %d  toold       p50 %6.3f ms  p99 %6.3f ms\n", round+1, p50, p99)
	}
	return nil
}

// bleveIndex indexes docs in memory: one Bleve document per tool, its id
// the tool's position.
func bleveIndex(docs []search.Doc) (bleve.Index, error) {
	m := bleve.NewIndexMapping()
	m.ScoringModel = "bm25"
	doc := bleve.NewDocumentMapping()
	field := func(name, analyzer string) {
		f := mapping.NewTextFieldMapping()
		f.Analyzer = analyzer
		doc.AddFieldMappingsAt(name, f)
	}
	field("name", standard.Name)
	field("server", standard.Name)
	field("description", en.AnalyzerName)
	field("params", standard.Name)
	field("paramdesc", en.AnalyzerName)
	m.DefaultMapping = doc
	idx, err := bleve.NewMemOnly(m)
	if err != nil {
		return nil, err
	}
	b := idx.NewBatch()
	for i, d := range docs {
		server, tool, _ := strings.Cut(d.Name, "__")
		if tool == "" {
			server, tool = "", d.Name
		}
		var params, pdesc []string
		for _, p := range d.Params {
			params = append(params, strings.ReplaceAll(p.Name, "_", " "))
			pdesc = append(pdesc, p.Description)
		}
		if err := b.Index(strconv.Itoa(i), map[string]any{"name": strings.ReplaceAll(tool, "_", " "), "server": server,
			"description": d.Description, "params": strings.Join(params, " "), "paramdesc": strings.Join(pdesc, " ")}); err != nil {
			return nil, err
		}
	}
	return idx, idx.Batch(b)
}

// bleveRanker asks each field with toold's field weights as boosts.
func bleveRanker(idx bleve.Index) evalset.Ranker {
	boosts := map[string]float64{"name": 3, "server": 1, "description": 1, "params": 0.6, "paramdesc": 0.4}
	return func(q string, limit int) []search.Hit {
		var qs []query.Query
		for f, boost := range boosts {
			mq := bleve.NewMatchQuery(q)
			mq.SetField(f)
			mq.SetBoost(boost)
			qs = append(qs, mq)
		}
		req := bleve.NewSearchRequestOptions(bleve.NewDisjunctionQuery(qs...), limit, 0, false)
		res, err := idx.Search(req)
		if err != nil {
			return nil
		}
		hits := make([]search.Hit, 0, len(res.Hits))
		for _, h := range res.Hits {
			n, _ := strconv.Atoi(h.ID)
			hits = append(hits, search.Hit{Doc: n, Score: h.Score})
		}
		return hits
	}
}

// replicate hosts docs on as many servers as it takes to reach n tools.
func replicate(docs []search.Doc, n int) []search.Doc {
	var out []search.Doc
	for k := 0; len(out) < n; k++ {
		for _, d := range docs {
			if len(out) == n {
				break
			}
			_, tool, ok := strings.Cut(d.Name, "__")
			if !ok {
				tool = d.Name
			}
			d.Name = fmt.Sprintf("server%d__%s", k, tool)
			out = append(out, d)
		}
	}
	return out
}

// latency is the median and 99th percentile of 2,000 searches, in ms.
func latency(queries []string, rank evalset.Ranker) (p50, p99 float64) {
	ds := make([]time.Duration, 0, 2000)
	for i := range 2000 {
		start := time.Now()
		rank(queries[i%len(queries)], 5)
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return ms(ds[len(ds)/2]), ms(ds[len(ds)*99/100])
}
