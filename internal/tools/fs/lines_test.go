package fs

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func collect(in string, bufSize int) ([]string, int, error) {
	var lines []string
	n, err := scanLines(strings.NewReader(in), bufSize, func(_ int, line []byte) bool {
		lines = append(lines, string(line))
		return true
	})
	return lines, n, err
}

func TestScanLines(t *testing.T) {
	long := strings.Repeat("x", 100)
	tests := []struct {
		in      string
		want    []string
		wantErr error
	}{
		{in: "", want: nil},
		{in: "\n", want: []string{""}},
		{in: "a", want: []string{"a"}},
		{in: "a\nb\n", want: []string{"a", "b"}},
		{in: "a\n\nb", want: []string{"a", "", "b"}},
		{in: "a\r\nb\r\n", want: []string{"a\r", "b\r"}},
		{in: long + "\n" + long, want: []string{long, long}}, // longer than the 16-byte buffer
		{in: "ok\nbad\x00\n", wantErr: errBinary},
		{in: "ok\n\xff\n", wantErr: errBinary},
		{in: strings.Repeat("a\n", 5000) + "\x00", want: nil}, // NUL after the sniffed bytes: still text
	}
	for _, tc := range tests {
		name := tc.in
		if len(name) > 20 {
			name = name[:20]
		}
		t.Run(strconv.Quote(name), func(t *testing.T) {
			got, n, err := collect(tc.in, 16)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr != nil {
				return
			}
			if tc.want == nil && tc.in != "" {
				tc.want = strings.Split(strings.TrimSuffix(tc.in, "\n"), "\n")
			}
			if diff := cmp.Diff(tc.want, got); diff != "" || n != len(got) {
				t.Errorf("n=%d (-want +got):\n%s", n, diff)
			}
		})
	}
}

func TestAppendNumbered(t *testing.T) {
	got := string(appendNumbered(nil, 7, []byte("x"))) + string(appendNumbered(nil, 1234567, []byte("y")))
	if want := "     7\tx\n1234567\ty\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if n := numberedLen(1234567, 1); n != len("1234567\ty\n") {
		t.Errorf("numberedLen = %d", n)
	}
}

// FuzzScanLines: the line reader splits any input into lines that join back
// into it, refuses exactly the binary inputs, and the numbered rendering
// parses back to the same number and line.
func FuzzScanLines(f *testing.F) {
	for _, s := range []string{"", "\n", "a\nb", "a\r\n", "x\x00y", "\xff\n", strings.Repeat("long", 50) + "\nz\n"} {
		f.Add([]byte(s), uint8(16))
	}
	f.Fuzz(func(t *testing.T, in []byte, size uint8) {
		var lines [][]byte
		n, err := scanLines(bytes.NewReader(in), int(size)+16, func(i int, line []byte) bool {
			if i != len(lines)+1 {
				t.Fatalf("line number %d after %d lines", i, len(lines))
			}
			out := appendNumbered(nil, i, line)
			num, rest, ok := bytes.Cut(out, []byte("\t"))
			if got, _ := strconv.Atoi(string(bytes.TrimLeft(num, " "))); !ok || got != i ||
				!bytes.Equal(rest, append(bytes.Clone(line), '\n')) || len(out) != numberedLen(i, len(line)) {
				t.Fatalf("numbered line %q does not parse back to %d %q", out, i, line)
			}
			lines = append(lines, bytes.Clone(line))
			return true
		})
		binary := bytes.IndexByte(in[:min(len(in), binarySniffBytes)], 0) >= 0 || !utf8.Valid(in)
		if errors.Is(err, errBinary) != binary {
			t.Fatalf("binary=%v but err=%v for %q", binary, err, in)
		}
		if err != nil {
			return
		}
		joined := bytes.Join(lines, []byte("\n"))
		if len(in) > 0 && in[len(in)-1] == '\n' {
			joined = append(joined, '\n')
		}
		if n != len(lines) || !bytes.Equal(joined, in) {
			t.Fatalf("lines %q (n=%d) do not rebuild %q", lines, n, in)
		}
	})
}
