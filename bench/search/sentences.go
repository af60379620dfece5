package main

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/toold/toold/bench/search/evalset"
	"github.com/toold/toold/internal/search"
	"github.com/toold/toold/tools/vectors"
)

// sentenceWeights are the weights of the encoder's cosine fused with
// toold's lexical ranking that -sentences measures.
var sentenceWeights = []float64{0.1, 0.2, 0.3, 0.5, 0.8}

// printSentences measures a real sentence encoder in place of the word
// vectors: the Universal Sentence Encoder lite (tools/vectors, run by
// Node.js) encodes each tool's name and description and each query whole,
// and its cosine is fused with toold's lexical ranking as the word
// vectors' is (the lexical score scaled to the best one, plus the weight
// times the cosine). It is the upper bound of what that model brings: an
// encoder run per query and per tool, which toold does not do (see
// docs/search.md, "Other models measured").
func printSentences(out io.Writer, set *evalset.Set, splits []string) error {
	texts := make([]string, 0, len(set.Tools)+len(set.Queries))
	for _, t := range set.Tools {
		texts = append(texts, toolSentence(t))
	}
	for _, q := range set.Queries {
		texts = append(texts, strings.ReplaceAll(q.Text, "\n", " "))
	}
	vecs, err := vectors.Encode(filepath.Join(filepath.Dir(testdata()), "..", "..", "tools", "vectors"), texts)
	if err != nil {
		return err
	}
	tools, queries := vecs[:len(set.Tools)], vecs[len(set.Tools):]
	byText := make(map[string][]float32, len(set.Queries))
	for i, q := range set.Queries {
		byText[q.Text] = queries[i]
	}
	o := search.DefaultOptions()
	o.Dense = false
	lexical := search.Build(set.Tools, o)
	ranker := func(w float64, lex bool) evalset.Ranker {
		return func(q string, limit int) []search.Hit {
			scores := make([]float64, len(tools))
			if lex {
				hits := lexical.Search(q, len(tools), nil)
				if len(hits) > 0 {
					for _, h := range hits {
						scores[h.Doc] = h.Score / hits[0].Score
					}
				}
			}
			hits := make([]search.Hit, 0, len(tools))
			for d, v := range tools {
				if s := scores[d] + w*max(cosine(byText[q], v), 0); s > 0 {
					hits = append(hits, search.Hit{Doc: d, Score: s})
				}
			}
			return best(hits, limit)
		}
	}
	for _, sp := range splits {
		qs := slices.DeleteFunc(slices.Clone(set.Queries), func(q evalset.Query) bool { return q.Split != sp })
		fmt.Fprintf(out, "\n%s: %d queries; the sentence encoder, alone and fused with toold lexical\nranker                  R@1    R@5    MRR    R@5 paraphrased\n", sp, len(qs))
		line := func(name string, r evalset.Ranker) {
			res := evalset.Evaluate(set, qs, r)
			all := res.Scores(func(evalset.Query) bool { return true })
			para := res.Scores(func(q evalset.Query) bool { return q.Kind == "paraphrased" })
			fmt.Fprintf(out, "%-22s  %.3f  %.3f  %.3f  %.3f\n", name, all.R1, all.R5, all.MRR, para.R5)
		}
		line("encoder alone", ranker(1, false))
		line("toold lexical", ranker(0, true))
		for _, w := range sentenceWeights {
			line(fmt.Sprintf("lexical + %.1f encoder", w), ranker(w, true))
		}
	}
	return nil
}

// toolSentence is what the encoder reads of a tool: its name's words and
// its description ("github list pull requests. Lists the...").
func toolSentence(t search.Doc) string {
	name := strings.NewReplacer("__", " ", "_", " ", ".", " ").Replace(t.Name)
	return strings.ReplaceAll(name+". "+t.Description, "\n", " ")
}

func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}
