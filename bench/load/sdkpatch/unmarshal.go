// Package sdkpatch holds the change to the MCP go-sdk (v1.8.0) that issue
// 17's profile points at, with the proof that it changes no answer.
//
// The SDK's internal/json.Unmarshal decodes every value through a new
// segmentio/encoding json.Decoder, and each allocates and zeroes a fresh
// 32 KiB read buffer: about a dozen for one tools/call, 89% of the bytes
// toold's /mcp allocates per call. Unmarshal here is the SDK's function
// with that fixed: a document that is exactly one valid JSON value (the
// usual case) is decoded straight from its bytes with json.Parse, which is
// the call the Decoder itself ends in, on the same bytes, with the same
// flags; everything else (invalid JSON, trailing data, empty input) still
// goes through the Decoder, so its errors are the SDK's to the letter.
// OldUnmarshal is the SDK's as released. go-sdk-internal-json.patch is the
// same change as a patch to the SDK.
//
// The tests decode a corpus and fuzzed inputs with both, into the types
// the SDK decodes into, and require the same value and the same error.
package sdkpatch

import (
	"bytes"
	"fmt"

	"github.com/segmentio/encoding/json"
)

const defaultMaxDepth = 1000

var errMaxDepthExceeded = fmt.Errorf("json: exceeded maximum nesting depth of %d", defaultMaxDepth)

// Unmarshal is the patched internal/json.Unmarshal.
func Unmarshal(data []byte, v any) error {
	if err := checkMaxDepth(data, defaultMaxDepth); err != nil {
		return err
	}
	if json.Valid(data) {
		// What Decoder.Decode does, without the fresh 32 KiB read buffer
		// it allocates: readValue returns the value with the surrounding
		// whitespace skipped, and Decode hands that to Parse with the
		// Decoder's flags. Anything else keeps the Decoder's exact errors.
		_, err := json.Parse(bytes.Trim(data, " \t\n\r"), v, json.DontMatchCaseInsensitiveStructFields)
		return err
	}
	return oldDecode(data, v)
}

// OldUnmarshal is internal/json.Unmarshal as go-sdk v1.8.0 has it.
func OldUnmarshal(data []byte, v any) error {
	if err := checkMaxDepth(data, defaultMaxDepth); err != nil {
		return err
	}
	return oldDecode(data, v)
}

func oldDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DontMatchCaseInsensitiveStructFields()
	return dec.Decode(v)
}

// checkMaxDepth is the SDK's, unchanged.
func checkMaxDepth(data []byte, maxDepth int) error {
	var (
		depth    int
		inString bool
		escaped  bool
	)
	for _, b := range data {
		if inString {
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
			continue
		}

		switch b {
		case '"':
			inString = true
		case '{', '[':
			depth++
			if depth > maxDepth {
				return errMaxDepthExceeded
			}
		case '}', ']':
			if depth > 0 {
				depth--
			}
		}
	}
	return nil
}
