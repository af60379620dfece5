package main

import (
	"fmt"
	"hash/fnv"
	"io"

	"github.com/toold/toold/bench/search/evalset"
	"github.com/toold/toold/internal/search"
)

// knob is one weight of the ranking and the values tuning tries.
type knob struct {
	name   string
	ptr    func(*search.Options) *float64
	values []float64
}

var knobs = []knob{
	{"weight name", func(o *search.Options) *float64 { return &o.Weights[0] }, []float64{1, 2, 3, 4, 6}},
	{"weight server", func(o *search.Options) *float64 { return &o.Weights[1] }, []float64{0.5, 1, 2, 3}},
	{"weight param name", func(o *search.Options) *float64 { return &o.Weights[3] }, []float64{0.2, 0.4, 0.6, 1}},
	{"weight param description", func(o *search.Options) *float64 { return &o.Weights[4] }, []float64{0.1, 0.2, 0.4, 0.8}},
	{"weight enum", func(o *search.Options) *float64 { return &o.Weights[5] }, []float64{0.1, 0.2, 0.4, 0.8}},
	{"b name", func(o *search.Options) *float64 { return &o.B[0] }, []float64{0, 0.3, 0.6, 0.9}},
	{"b description", func(o *search.Options) *float64 { return &o.B[2] }, []float64{0.3, 0.5, 0.75, 0.9}},
	{"k1", func(o *search.Options) *float64 { return &o.K1 }, []float64{0.6, 0.9, 1.2, 1.6, 2}},
	{"related", func(o *search.Options) *float64 { return &o.Related }, []float64{0.3, 0.4, 0.5, 0.6, 0.8}},
	{"general", func(o *search.Options) *float64 { return &o.General }, []float64{0, 0.1, 0.25, 0.4}},
	{"server boost", func(o *search.Options) *float64 { return &o.ServerBoost }, []float64{0, 0.25, 0.5, 1}},
	{"dense weight", func(o *search.Options) *float64 { return &o.DenseWeight }, []float64{0, 0.05, 0.1, 0.2, 0.35}},
	{"value weight", func(o *search.Options) *float64 { return &o.ValueWeight }, []float64{0, 0.3, 0.6, 1}},
	{"negation penalty", func(o *search.Options) *float64 { return &o.NegationPenalty }, []float64{0, 0.3, 0.5, 0.8}},
	{"dense floor", func(o *search.Options) *float64 { return &o.DenseFloor }, []float64{0, 0.1, 0.2, 0.3}},
	{"dense description", func(o *search.Options) *float64 { return &o.DenseFields[2] }, []float64{0.25, 0.5, 1, 2}},
	{"dense parameters", func(o *search.Options) *float64 { return &o.DenseFields[3] }, []float64{0, 0.25, 0.5}},
}

// objective is what tuning maximises: MRR plus recall@5 of qs, searched
// among the tools of set.
func objective(set *evalset.Set, qs []evalset.Query, o search.Options) float64 {
	s := evalset.Evaluate(set, qs, ixRanker(search.Build(set.Tools, o))).Scores(func(evalset.Query) bool { return true })
	return s.MRR + s.R5
}

// coordinateSearch searches the knobs one at a time (two rounds), from
// DefaultOptions, for the best objective on set's queries among its tools,
// keeping a value only if it raises the objective by more than margin; it
// reports each choice to log (nil: silent).
func coordinateSearch(set *evalset.Set, margin float64, log io.Writer) search.Options {
	o := search.DefaultOptions()
	best := objective(set, set.Queries, o)
	for round := range 2 {
		for _, k := range knobs {
			for _, v := range k.values {
				trial := o
				*k.ptr(&trial) = v
				if score := objective(set, set.Queries, trial); score > best+margin {
					best, o = score, trial
				}
			}
			if log != nil {
				fmt.Fprintf(log, "round %d: %-24s %.2f  (MRR+R@5 %.3f)\n", round+1, k.name, *k.ptr(&o), best)
			}
		}
	}
	return o
}

// folds is how many parts cross-validation cuts the dev integrations into.
const folds = 3

// tune chooses the ranking's weights on the dev split only (a catalog of
// the dev integrations' tools; the held-out integrations are never seen),
// and first says whether choosing them so generalises: it cuts the dev
// integrations into folds (by a hash of the name, as the split itself),
// tunes on all folds but one and measures the one left out, among all the
// dev tools, against DefaultOptions. A margin that does not beat the
// defaults on the folds left out is fitting noise.
func tune(out io.Writer, set *evalset.Set, margin float64) {
	dev := set.Only(evalset.Dev)
	fold := func(integration string) int {
		h := fnv.New32a()
		h.Write([]byte("fold:" + integration))
		return int(h.Sum32() % folds)
	}
	fmt.Fprintf(out, "cross-validation over the dev integrations (%d folds), margin %.3f: MRR+R@5 of the fold left out\n", folds, margin)
	var sumDef, sumTuned float64
	for f := range folds {
		train := &evalset.Set{Integration: dev.Integration, Unseen: dev.Unseen}
		var test []evalset.Query
		for _, t := range dev.Tools {
			if fold(dev.Integration[t.Name]) != f {
				train.Tools = append(train.Tools, t)
			}
		}
		for _, q := range dev.Queries {
			if fold(dev.Integration[q.Expected[0]]) != f {
				train.Queries = append(train.Queries, q)
			} else {
				test = append(test, q)
			}
		}
		tuned := coordinateSearch(train, margin, nil)
		def, got := objective(dev, test, search.DefaultOptions()), objective(dev, test, tuned)
		sumDef += def
		sumTuned += got
		fmt.Fprintf(out, "fold %d: %3d queries  defaults %.3f  tuned on the other folds %.3f\n", f+1, len(test), def, got)
	}
	fmt.Fprintf(out, "mean: defaults %.3f  tuned %.3f\n\ntuned on the whole dev split:\n", sumDef/folds, sumTuned/folds)
	coordinateSearch(dev, margin, out)
}
