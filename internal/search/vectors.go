package search

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
)

//go:generate go run gen_vectors.go

// vectorFile is the table of term vectors gen_vectors.go derives from
// GloVe (see WORDVECTORS_LICENSE): int8, one row per index term.
//
//go:embed wordvectors.bin
var vectorFile []byte

// vectorTable maps index terms to their vectors. It is parsed once per
// process and shared, read-only, by every index.
type vectorTable struct {
	dims int
	rows map[string]int32
	// data holds rows*dims int8 values (a slice of the embedded file, so
	// no copy lives on the heap); scale is each row's factor to unit
	// length times the term's weight (see sif).
	data  []byte
	scale []float32
}

// vectors is the embedded table, parsed the first time an index needs it.
var vectors = sync.OnceValues(func() (*vectorTable, error) { return parseVectors(vectorFile) })

// parseVectors reads the format gen_vectors.go writes: the line
// "toold-wordvectors 1 <dims> <count>", count terms a line each, then
// count*dims int8 values.
func parseVectors(b []byte) (*vectorTable, error) {
	head, rest, ok := bytes.Cut(b, []byte{'\n'})
	fs := bytes.Fields(head)
	if !ok || len(fs) != 4 || string(fs[0]) != "toold-wordvectors" || string(fs[1]) != "1" {
		return nil, errors.New("search: the word vector table has no header")
	}
	dims, err1 := strconv.Atoi(string(fs[2]))
	count, err2 := strconv.Atoi(string(fs[3]))
	if err1 != nil || err2 != nil || dims <= 0 || dims > 1024 || count <= 0 || count > 1<<22 {
		return nil, fmt.Errorf("search: the word vector table's header %q is malformed", head)
	}
	t := &vectorTable{dims: dims, rows: make(map[string]int32, count)}
	for i := range count {
		var term []byte
		if term, rest, ok = bytes.Cut(rest, []byte{'\n'}); !ok {
			return nil, fmt.Errorf("search: the word vector table ends at term %d of %d", i, count)
		}
		if _, dup := t.rows[string(term)]; !dup {
			t.rows[string(term)] = int32(i)
		}
	}
	if len(rest) != count*dims {
		return nil, fmt.Errorf("search: the word vector table holds %d bytes of vectors, want %d", len(rest), count*dims)
	}
	t.data = rest
	t.scale = make([]float32, count)
	for i := range count {
		var n float64
		for _, v := range t.row(int32(i)) {
			n += float64(int8(v)) * float64(int8(v))
		}
		if n > 0 {
			t.scale[i] = float32(sif(i, count) / math.Sqrt(n))
		}
	}
	return t, nil
}

// sif is the weight of the term of rank r (0 the most frequent) among
// count: a/(a+p), p its probability by Zipf's law. Smooth inverse
// frequency (Arora, Liang and Ma, ICLR 2017) lets rare, telling words
// ("refund") outweigh common ones ("make") in a mean of vectors; on the
// dev split it ranked better than the catalog's idf or no weight.
func sif(r, count int) float64 {
	const a = 1e-3
	p := 1 / (float64(r+1) * (math.Log(float64(count)) + 0.5772))
	return a / (a + p)
}

func (t *vectorTable) row(r int32) []byte {
	return t.data[int(r)*t.dims : int(r+1)*t.dims]
}

// add adds w times term's weighted unit vector to dst, and reports
// whether the table knows the term.
func (t *vectorTable) add(dst []float32, term string, w float32) bool {
	r, ok := t.rows[term]
	if !ok {
		return false
	}
	w *= t.scale[r]
	for i, v := range t.row(r) {
		dst[i] += w * float32(int8(v))
	}
	return true
}

// normalize scales v to unit length, and reports whether it has one.
func normalize(v []float32) bool {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	if n == 0 {
		return false
	}
	s := float32(1 / math.Sqrt(n))
	for i := range v {
		v[i] *= s
	}
	return true
}
