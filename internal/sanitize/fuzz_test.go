package sanitize

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toold/toold/internal/tools"
)

// Run each for a while with, e.g.:
//
//	go test ./internal/sanitize -run X -fuzz FuzzOutput -fuzztime 30s

func addCorpusSeeds(f *testing.F, wrap func(string) []byte) {
	for _, dir := range []string{"canary", "clean"} {
		files, _ := filepath.Glob(filepath.Join("testdata", dir, "*"))
		for _, file := range files {
			if b, err := os.ReadFile(file); err == nil && len(b) < 8192 {
				f.Add(wrap(string(b)))
			}
		}
	}
	for _, s := range []string{"", "\x1b[31mx\x1b", "a\xffb\xe2\x82", "-----BEGIN PRIVATE KEY-----\nAB", "jane@example.com+14155550132",
		"password=" + strings.Repeat("=", 40), `{"a":[1,{"b":"4111111111111111"}]}`, `"\ud800"`, "[REDACTED:email]@x.com"} {
		f.Add(wrap(s))
	}
}

func jsonString(s string) []byte { b, _ := json.Marshal(map[string]string{"stdout": s}); return b }

// FuzzOutput: never panics; always valid UTF-8 and valid JSON; never over
// the cap; sanitizing the output again changes nothing; and where nothing
// is redacted or cut, the fast walk writes what the reference walk
// (encoding/json's tree, each string repaired) writes.
func FuzzOutput(f *testing.F) {
	addCorpusSeeds(f, jsonString)
	addCorpusSeeds(f, func(s string) []byte { return []byte(s) }) // raw, mostly not JSON
	// Keys and values the walk must repair in place (escaped and raw
	// control characters, a terminal escape, a bad byte), for the
	// reference walk to compare.
	f.Add([]byte(`{"a\u001b[31mb":1,"c":["\u0007x",{"d\u0000":null}]}`))
	f.Add([]byte("{\"k\x1b[0m\":\"v\x07\",\"\xffz\":-1.5e3}"))
	const limit = 2048
	s, _ := New(Config{Defaults: Policy{Output: OutputPolicy{MaxBytes: limit}, Detectors: map[string]bool{"ip_address": true}}}, nil)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, spec := range []*tools.Spec{commandSpec, directSpec} {
			out, rep, err := s.Output(context.Background(), spec, data)
			if err != nil {
				t.Fatal(err)
			}
			if !utf8.Valid(out) || !json.Valid(out) {
				t.Fatalf("invalid output %q from %q", out, data)
			}
			if len(out) > limit {
				t.Fatalf("%d bytes over the %d cap (%+v)", len(out), limit, rep)
			}
			if want, ok := referenceOutput(data, s.policyFor(spec).strip); ok && rep.Redactions == 0 && !rep.Truncated {
				sameAsReference(t, data, out, want)
			}
			again, _, _ := s.Output(context.Background(), spec, out)
			if string(again) != string(out) {
				t.Fatalf("not idempotent:\n in    %q\n once  %q\n twice %q", data, out, again)
			}
		}
	})
}

// FuzzRedactString: the log helper and Text never panic, return valid
// UTF-8, and are idempotent.
func FuzzRedactString(f *testing.F) {
	addCorpusSeeds(f, func(s string) []byte { return []byte(s) })
	s, _ := New(withIP, nil)
	f.Fuzz(func(t *testing.T, data []byte) {
		in := string(data)
		once := s.RedactString("run_command", in)
		if !utf8.ValidString(once) {
			t.Fatalf("invalid UTF-8 %q", once)
		}
		if twice := s.RedactString("run_command", once); twice != once {
			t.Fatalf("not idempotent:\n in    %q\n once  %q\n twice %q", in, once, twice)
		}
		msg, _ := s.Text(commandSpec, in)
		if again, _ := s.Text(commandSpec, msg); again != msg || !utf8.ValidString(msg) {
			t.Fatalf("Text not idempotent: %q -> %q -> %q", in, msg, again)
		}
	})
}

// FuzzStream: text written in random pieces redacts exactly as written at
// once, and the result is valid UTF-8.
func FuzzStream(f *testing.F) {
	addCorpusSeeds(f, func(s string) []byte { return []byte(s) })
	s, _ := New(Config{Defaults: Policy{Output: OutputPolicy{StripANSI: ptr(true)}, Detectors: map[string]bool{"ip_address": true}}}, nil)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > DefaultStreamWindowBytes/2 {
			return // equality is promised for lines shorter than the window
		}
		text := string(data)
		whole := streamAll(t, s, "cmd", []string{text})
		if !utf8.ValidString(whole) {
			t.Fatalf("invalid UTF-8 %q", whole)
		}
		rng := rand.New(rand.NewPCG(uint64(len(data)), 7))
		for _, maxLen := range []int{1, 3, 17} {
			if got := streamAll(t, s, "cmd", chunks(rng, text, maxLen)); got != whole {
				t.Fatalf("chunks of <=%d differ:\n in    %q\n whole %q\n got   %q", maxLen, text, whole, got)
			}
		}
	})
}

// FuzzInput: any decoded JSON, in every mode, never panics and stays
// marshalable; walked again (on a copy, with the walk's buffers reused
// from the first), it gives the same answer.
func FuzzInput(f *testing.F) {
	addCorpusSeeds(f, jsonString)
	f.Add([]byte(`{"a\u0000":"\u0007","b":[{"password":"x"}]}`))
	strip := Policy{Input: InputPolicy{ControlChars: "strip", Secrets: "redact", PII: "redact", MaxStringBytes: 4096, MaxTotalBytes: 8192}}
	block := Policy{Input: InputPolicy{Secrets: "block", PII: "block"}}
	ss := []*Sanitizer{newTB(f, Config{Defaults: strip}), newTB(f, Config{Defaults: block})}
	f.Fuzz(func(t *testing.T, data []byte) {
		decode := func() (any, bool) {
			var v any
			d := json.NewDecoder(strings.NewReader(string(data)))
			d.UseNumber()
			return v, d.Decode(&v) == nil
		}
		if _, ok := decode(); !ok {
			return
		}
		for _, s := range ss {
			var first string
			for round := range 2 {
				v, _ := decode()
				out, _, err := s.Input(context.Background(), directSpec, v)
				got := fmt.Sprint(err)
				if err == nil {
					b, err := json.Marshal(out)
					if err != nil {
						t.Fatal(err)
					}
					got = string(b)
				} else if _, ok := tools.AsError(err); !ok {
					t.Fatalf("untyped error %v", err)
				}
				if round == 0 {
					first = got
				} else if got != first {
					t.Fatalf("walked again: %s, first %s", got, first)
				}
			}
		}
	})
}
