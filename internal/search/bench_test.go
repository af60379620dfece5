package search

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// largeCatalog is the evaluation catalog of bench/search, hosted by as
// many servers as it takes to reach n tools: every tool renamed
// serverK__tool, so the vocabulary, the lengths and the postings are a
// real catalog's.
func largeCatalog(tb testing.TB, n int) []Doc {
	tb.Helper()
	f, err := os.Open("../../bench/search/testdata/catalog.txt")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var base []Doc
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "" || line[0] == '#' || line[0] == '@':
		case strings.HasPrefix(line, "  "):
			name, desc, _ := strings.Cut(strings.TrimSpace(line), ": ")
			base[len(base)-1].Params = append(base[len(base)-1].Params, Param{Name: name, Description: desc})
		default:
			name, desc, _ := strings.Cut(line, ": ")
			base = append(base, Doc{Name: name, Description: desc})
		}
	}
	var docs []Doc
	for k := 0; len(docs) < n; k++ {
		for _, d := range base {
			if len(docs) == n {
				break
			}
			_, tool := splitName(d.Name)
			d.Name = fmt.Sprintf("server%d__%s", k, tool)
			docs = append(docs, d)
		}
	}
	return docs
}

var benchQueries = []string{
	"list pull requests in a repository", "show me the open PRs on the frontend repo",
	"who is on call right now", "give the customer their money back", "bounce the pods of checkout",
	"what was the CPU usage of the web hosts over the last hour", "find all open bugs assigned to me",
	"upload a file to the bucket", "email the report to finance", "create a calendar event with attendees",
	"revenue this year", "how far away is the airport",
}

// scanQueries share no word with the catalog: the hybrid ranking reads
// every tool's vector (its worst case).
var scanQueries = []string{"what can I do here", "videoconference", "earnings"}

// rankings are the two rankings measured side by side: toold's (hybrid:
// BM25F and word vectors) and its lexical part alone (issue 28's).
var rankings = []struct {
	name  string
	dense bool
}{{"hybrid", true}, {"lexical", false}}

// BenchmarkSearch10k searches 10,000 tools, one query at a time, and
// reports the 99th percentile of a search (run it on one core: -cpu 1),
// by the wall clock and by its thread's CPU time (which other processes
// on a shared machine do not inflate), and the index's heap; for the
// hybrid ranking and the lexical one alone, in one run.
func BenchmarkSearch10k(b *testing.B) {
	docs := largeCatalog(b, 10000)
	thesaurusFor(true) // parsed once per process, not per index
	if _, err := vectors(); err != nil {
		b.Fatal(err)
	}
	for _, r := range rankings {
		b.Run(r.name, func(b *testing.B) { benchSearch(b, docs, r.dense, benchQueries) })
	}
	b.Run("hybrid-scan", func(b *testing.B) { benchSearch(b, docs, true, scanQueries) })
}

func benchSearch(b *testing.B, docs []Doc, dense bool, queries []string) {
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	o := DefaultOptions()
	o.Dense = dense
	ix := Build(docs, o)
	indexMiB := float64(heap()-before) / (1 << 20)
	keep := func(d int) bool { return d%7 != 0 } // a caller's view
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	wall := make([]time.Duration, 0, b.N)
	cpu := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start, startCPU := time.Now(), threadCPU()
		if len(ix.Search(queries[i%len(queries)], 5, keep)) == 0 {
			b.Fatal("no hits")
		}
		cpu = append(cpu, threadCPU()-startCPU)
		wall = append(wall, time.Since(start))
	}
	b.StopTimer()
	p99 := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)*99/100].Microseconds()) / 1000
	}
	b.ReportMetric(p99(wall), "p99-ms")
	b.ReportMetric(p99(cpu), "p99-cpu-ms")
	b.ReportMetric(indexMiB, "index-MiB")
	b.ReportMetric(float64(ix.Bytes())/(1<<20), "estimate-MiB")
	runtime.KeepAlive(ix)
	runtime.KeepAlive(docs)
}

// BenchmarkBuild10k builds the index of 10,000 tools: what a registry
// snapshot's first search costs.
func BenchmarkBuild10k(b *testing.B) {
	docs := largeCatalog(b, 10000)
	thesaurusFor(true)
	if _, err := vectors(); err != nil {
		b.Fatal(err)
	}
	for _, r := range rankings {
		b.Run(r.name, func(b *testing.B) {
			o := DefaultOptions()
			o.Dense = r.dense
			for b.Loop() {
				Build(docs, o)
			}
		})
	}
}

// BenchmarkLoadTables parses the embedded thesaurus, WordNet's table and
// the word vectors: what a process pays once, at its first search.
func BenchmarkLoadTables(b *testing.B) {
	for b.Loop() {
		parseThesaurus(true)
		if _, err := parseVectors(vectorFile); err != nil {
			b.Fatal(err)
		}
	}
}
