package search

// The dense part of the ranking: a tool and a query are each the weighted
// mean of their terms' vectors (static word embeddings, model2vec-style:
// no encoder runs, a table lookup per term), compared by cosine. It finds
// the tools whose words mean what the query's words mean when they share
// none ("did we make money" and "profit and loss report"); the lexical
// ranking keeps what it is sure of, and the two rankings are fused.

// Fusion says how the lexical and dense rankings are combined.
type Fusion int

const (
	// RRF is reciprocal rank fusion: a tool scores 1/(k+rank) in each
	// ranking, the dense one's times DenseWeight.
	RRF Fusion = iota
	// Linear adds the lexical score, scaled to the best one, and
	// DenseWeight times the cosine above DenseFloor, scaled likewise.
	Linear
)

// denseIndex holds the tools' vectors.
type denseIndex struct {
	table *vectorTable
	dims  int
	vecs  []float32 // n rows of dims, unit length or zero
}

// buildDense embeds each tool: its fields' terms weighted by the field's
// DenseFields weight (and the table's weight of each term).
func (ix *Index) buildDense(fields [][numFields][]string) {
	t, err := vectors()
	if err != nil {
		return // an index without vectors ranks lexically; TestVectorTable guards the table
	}
	d := &denseIndex{table: t, dims: t.dims, vecs: make([]float32, len(fields)*t.dims)}
	for i, fs := range fields {
		v := d.vecs[i*d.dims : (i+1)*d.dims]
		for f, terms := range fs {
			w := ix.opts.DenseFields[f]
			if w == 0 {
				continue
			}
			for _, term := range terms {
				t.add(v, term, float32(w))
			}
		}
		normalize(v)
	}
	ix.dense = d
}

// queryVector embeds a query's concepts (their own terms, not their
// alternatives), or returns nil when the table knows none of them.
func (ix *Index) queryVector(concepts [][]alternative) []float32 {
	d := ix.dense
	q := make([]float32, d.dims)
	for _, c := range concepts {
		d.table.add(q, c[0].term, float32(c[0].weight))
	}
	if !normalize(q) {
		return nil
	}
	return q
}

// fallback answers a query that has no concept (every word a stop word:
// "what can you do?") by its words' vectors alone, stop words included, so
// that a query with a word the table knows is never answered with nothing.
func (ix *Index) fallback(query string, limit int, keep func(int) bool) []Hit {
	if ix.dense == nil {
		return nil
	}
	q := make([]float32, ix.dense.dims)
	for _, w := range words(query, ix.an.prose()) {
		ix.dense.table.add(q, ix.an.queryTerm(w), 1)
	}
	if !normalize(q) {
		return nil
	}
	dense := make([]float32, ix.n)
	ix.dense.denseScores(q, dense)
	scores := make([]float64, ix.n)
	for d, s := range dense {
		scores[d] = max(float64(s), 0)
	}
	return top(scores, limit, keep)
}

// denseScores writes each tool's cosine with q into out.
func (d *denseIndex) denseScores(q []float32, out []float32) {
	for i := range out {
		out[i] = d.cosine(q, i)
	}
}

// cosine is tool i's cosine with q (both unit length).
func (d *denseIndex) cosine(q []float32, i int) float32 {
	dims := d.dims
	v := d.vecs[i*dims : (i+1)*dims : (i+1)*dims]
	q = q[:dims:dims]
	var s0, s1, s2, s3 float32
	j := 0
	for ; j+4 <= dims; j += 4 {
		s0 += q[j] * v[j]
		s1 += q[j+1] * v[j+1]
		s2 += q[j+2] * v[j+2]
		s3 += q[j+3] * v[j+3]
	}
	for ; j < dims; j++ {
		s0 += q[j] * v[j]
	}
	return s0 + s1 + s2 + s3
}

// fuse combines, in place, the lexical scores with the tools' cosines with
// q, for the tools keep accepts; limit is how many the search returns.
func (ix *Index) fuse(lexical []float64, q []float32, b *buffers, limit int, keep func(int) bool) {
	if ix.opts.Fusion == RRF {
		ix.fuseRanks(lexical, q, b, keep)
		return
	}
	ix.fuseLinear(lexical, q, limit, keep)
}

// fuseLinear scores a tool its lexical score, scaled to the best one, plus
// DenseWeight times its cosine above DenseFloor. A tool's cosine adds at
// most DenseWeight*(1-DenseFloor), so once limit tools score more than that
// lexically, only the tools that could reach the last of them need their
// cosine: the exact answer, without a pass over every tool's vector when
// the words already found enough.
func (ix *Index) fuseLinear(lexical []float64, q []float32, limit int, keep func(int) bool) {
	o := ix.opts
	best := 0.0
	for _, s := range lexical {
		best = max(best, s)
	}
	if best > 0 {
		for d, s := range lexical {
			lexical[d] = s / best
		}
	}
	reach := o.DenseWeight * (1 - o.DenseFloor)
	last := 0.0
	if hits := top(lexical, limit, keep); len(hits) == limit {
		last = hits[limit-1].Score
	}
	for d, s := range lexical {
		if last >= reach && s+reach <= last {
			continue
		}
		lexical[d] = s + o.DenseWeight*max(float64(ix.dense.cosine(q, d))-o.DenseFloor, 0)
	}
}

// fuseRanks is reciprocal rank fusion (measured by bench/search's
// ablation): a tool scores 1/(k+rank) in each ranking, the dense one's
// times DenseWeight.
func (ix *Index) fuseRanks(lexical []float64, q []float32, b *buffers, keep func(int) bool) {
	o := ix.opts
	if b.dense == nil {
		b.dense = make([]float64, ix.n)
	}
	for d := range b.dense {
		b.dense[d] = max(float64(ix.dense.cosine(q, d))-o.DenseFloor, 0)
	}
	lex := top(lexical, o.FusionDepth, keep)
	clear(lexical)
	for r, h := range lex {
		lexical[h.Doc] += 1 / (o.RRFK + float64(r+1))
	}
	for r, h := range top(b.dense, o.FusionDepth, keep) {
		lexical[h.Doc] += o.DenseWeight / (o.RRFK + float64(r+1))
	}
	clear(b.dense)
}

// Dense reports whether the index ranks with word vectors too.
func (ix *Index) Dense() bool { return ix.dense != nil }

// denseBytes is the memory of the tools' vectors.
func (ix *Index) denseBytes() int {
	if ix.dense == nil {
		return 0
	}
	return cap(ix.dense.vecs) * 4
}
