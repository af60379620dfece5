package dispatch

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"
)

// AppendJSON appends the envelope's JSON to dst. It writes what
// encoding/json would (a test holds them equal) without reflection, and
// without re-validating Data, which the sanitizer already returned as valid
// JSON: the envelope is written once per call, so this is the hot path.
func (env *Envelope) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"request_id":`...)
	dst = appendString(dst, env.RequestID)
	dst = append(dst, `,"tool":`...)
	dst = appendString(dst, env.Tool)
	dst = append(dst, `,"status":`...)
	dst = appendString(dst, string(env.Status))
	dst = append(dst, `,"success":`...)
	dst = strconv.AppendBool(dst, env.Success)
	dst = append(dst, `,"data":`...)
	if len(env.Data) == 0 {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, env.Data...)
	}
	dst = append(dst, `,"error":`...)
	dst = appendMarshal(dst, env.Error)
	dst = append(dst, `,"duration_ms":`...)
	dst = appendFloat(dst, env.DurationMS)
	dst = append(dst, `,"timing":{"queued_ms":`...)
	dst = appendFloat(dst, env.Timing.QueuedMS)
	dst = append(dst, `,"execute_ms":`...)
	dst = appendFloat(dst, env.Timing.ExecuteMS)
	dst = append(dst, `,"sanitize_ms":`...)
	dst = appendFloat(dst, env.Timing.SanitizeMS)
	dst = append(dst, `},"started_at":"`...)
	dst = env.StartedAt.AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, `","sanitized":`...)
	r := env.Sanitized
	if r.Redactions == 0 && !r.Truncated && r.OriginalBytes == 0 && len(r.ByKind) == 0 && len(r.Notes) == 0 {
		dst = append(dst, `{"redactions":0,"truncated":false}`...)
	} else {
		dst = appendMarshal(dst, r)
	}
	return append(dst, '}')
}

// MarshalJSON makes every encoding of an envelope the same.
func (env *Envelope) MarshalJSON() ([]byte, error) { return env.AppendJSON(nil), nil }

// appendMarshal is for the rare, structured parts (an error, a report with
// redactions); nil encodes as null.
func appendMarshal(dst []byte, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil || string(b) == "null" {
		return append(dst, "null"...)
	}
	return append(dst, b...)
}

// appendFloat writes a number as encoding/json does for the small,
// non-negative values an envelope holds.
func appendFloat(dst []byte, f float64) []byte {
	if f < 1e-6 || f >= 1e21 {
		b, _ := json.Marshal(f)
		return append(dst, b...)
	}
	return strconv.AppendFloat(dst, f, 'f', -1, 64)
}

// appendString writes s as a JSON string, escaping as encoding/json does
// (HTML characters included) and replacing invalid UTF-8.
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
