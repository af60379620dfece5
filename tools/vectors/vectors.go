// Package vectors runs the sentence encoder this directory pins (npm:
// Google's Universal Sentence Encoder lite, as @energetic-ai ships it) over
// lines of text. It is for measuring the encoder against the word vectors
// toold embeds (internal/search/gen_vectors.go with SOURCE=use, and
// bench/search -sentences; docs/search.md, "Other models measured"): toold
// itself never runs it, nor needs Node.js or npm.
package vectors

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Dims are the encoder's output dimensions.
const Dims = 512

// Encode encodes each line (none may hold a newline) with dir/embed.js,
// dir being this directory with its packages installed (npm ci).
func Encode(dir string, lines []string) ([][]float32, error) {
	if _, err := os.Stat(filepath.Join(dir, "node_modules")); err != nil {
		return nil, fmt.Errorf("the encoder is not installed: run npm ci --prefix %s", dir)
	}
	for i, l := range lines {
		if strings.ContainsAny(l, "\r\n") {
			return nil, fmt.Errorf("line %d holds a line break", i+1)
		}
	}
	f, err := os.CreateTemp("", "vectors-*.bin")
	if err != nil {
		return nil, err
	}
	f.Close()
	defer os.Remove(f.Name())
	cmd := exec.Command("node", filepath.Join(dir, "embed.js"), f.Name())
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("node embed.js: %w", err)
	}
	b, err := os.ReadFile(f.Name())
	if err != nil {
		return nil, err
	}
	if len(b) != len(lines)*Dims*4 {
		return nil, fmt.Errorf("embed.js wrote %d bytes for %d lines, want %d", len(b), len(lines), len(lines)*Dims*4)
	}
	vecs := make([][]float32, len(lines))
	for i := range vecs {
		v := make([]float32, Dims)
		for j := range v {
			v[j] = math.Float32frombits(binary.LittleEndian.Uint32(b[(i*Dims+j)*4:]))
		}
		vecs[i] = v
	}
	return vecs, nil
}
