package main

import (
	"fmt"
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
}

// tune searches the knobs one at a time (two rounds) for the best MRR
// plus recall@5 of the dev split, on a catalog of the dev integrations'
// tools only: the held-out integrations are never seen while tuning. It
// prints each choice.
func tune(out io.Writer, set *evalset.Set) {
	dev := set.Only(evalset.Dev)
	objective := func(o search.Options) float64 {
		s := evalset.Evaluate(dev, dev.Queries, ixRanker(search.Build(dev.Tools, o))).Scores(func(evalset.Query) bool { return true })
		return s.MRR + s.R5
	}
	o := search.DefaultOptions()
	best := objective(o)
	for round := range 2 {
		for _, k := range knobs {
			for _, v := range k.values {
				trial := o
				*k.ptr(&trial) = v
				if score := objective(trial); score > best+1e-9 {
					best, o = score, trial
				}
			}
			fmt.Fprintf(out, "round %d: %-24s %.2f  (MRR+R@5 %.3f)\n", round+1, k.name, *k.ptr(&o), best)
		}
	}
}
