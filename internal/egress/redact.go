package egress

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"strings"
)

// Redacted replaces an injected secret wherever a response of its host
// echoes it (a header, the body), before the run reads it.
const Redacted = "[redacted by toold]"

// secretsOf are what a response must not carry for an injected value:
// the value whole, and each of its words but a leading scheme ("Bearer",
// "Basic", "token") when it has more than one — a server that echoes only
// the token leaks it as well. Words shorter than 4 bytes are not secrets
// worth the noise of redacting them.
func secretsOf(value string) [][]byte {
	out := [][]byte{[]byte(value)}
	words := strings.Fields(value)
	if len(words) > 1 {
		words = words[1:]
	}
	for _, w := range words {
		if len(w) >= 4 && w != value {
			out = append(out, []byte(w))
		}
	}
	// Longest first: a word inside the whole value must not hide it.
	slices.SortFunc(out, func(a, b []byte) int { return len(b) - len(a) })
	return out
}

// redactHeader replaces the secrets in every value of h.
func redactHeader(h http.Header, secrets [][]byte) {
	for k, vs := range h {
		for i, v := range vs {
			vs[i] = string(redactAll([]byte(v), secrets))
		}
		h[k] = vs
	}
}

// redactAll replaces every whole secret in b.
func redactAll(b []byte, secrets [][]byte) []byte {
	for _, s := range secrets {
		if len(s) > 0 && bytes.Contains(b, s) {
			b = bytes.ReplaceAll(b, s, []byte(Redacted))
		}
	}
	return b
}

// redactor reads r with every secret replaced, across reads: a secret
// split between two reads of r is still found, because the bytes that
// could begin one are held back until the next read decides.
type redactor struct {
	r       io.Reader
	secrets [][]byte
	in      []byte // read from r, not yet decided
	out     []byte // decided, not yet returned
	buf     []byte // what each read of r reads into
	eof     error
}

func newRedactor(r io.Reader, secrets [][]byte) *redactor {
	return &redactor{r: r, secrets: secrets}
}

func (d *redactor) Read(p []byte) (int, error) {
	for len(d.out) == 0 {
		if d.eof != nil {
			return 0, d.eof
		}
		if d.buf == nil {
			d.buf = make([]byte, 32<<10)
		}
		n, err := d.r.Read(d.buf)
		d.in = append(d.in, d.buf[:n]...)
		if err != nil {
			d.eof = err
		}
		d.decide(d.eof != nil)
	}
	n := copy(p, d.out)
	d.out = d.out[n:]
	if len(d.out) == 0 {
		d.out = d.out[:0:0]
	}
	return n, nil
}

// decide moves what can no longer be part of a secret from in to out,
// secrets replaced leftmost first, the longest at one place; at the end
// everything moves. Bytes that begin a secret the input has not finished
// wait for the next read.
func (d *redactor) decide(end bool) {
	i := 0
	for i < len(d.in) {
		j := d.next(i)
		d.out = append(d.out, d.in[i:j]...)
		if i = j; i == len(d.in) {
			break
		}
		best, pending := 0, false
		rest := d.in[i:]
		for _, s := range d.secrets {
			switch {
			case len(s) == 0:
			case len(rest) >= len(s):
				if len(s) > best && bytes.HasPrefix(rest, s) {
					best = len(s)
				}
			case !end && bytes.HasPrefix(s, rest):
				pending = true
			}
		}
		if pending {
			break
		}
		if best > 0 {
			d.out = append(d.out, Redacted...)
			i += best
			continue
		}
		d.out = append(d.out, d.in[i])
		i++
	}
	d.in = append([]byte(nil), d.in[i:]...)
}

// next is the first place from i where a secret may begin.
func (d *redactor) next(i int) int {
	at := len(d.in)
	for _, s := range d.secrets {
		if len(s) == 0 {
			continue
		}
		if k := bytes.IndexByte(d.in[i:at], s[0]); k >= 0 {
			at = i + k
		}
	}
	return at
}
