package executions

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/toold/toold/internal/strictjson"
)

// encode is the record as encoding/json writes it, byte for byte. Every
// write of an execution encodes its record (a quick call's one write, a
// queued run's three), and reflection cost ~6µs of a quick call's answer:
// the records most writes hold — no principal, batch, wait, resumption,
// approval or lineage; names, ids and statuses of plain ASCII; arguments
// and envelope compact, with nothing encoding/json would escape — are
// written directly, the rest by encoding/json. TestEncodeIsEncodingJSON
// holds the two to the same bytes.
func (r *Record) encode() []byte {
	if b, ok := r.appendPlain(make([]byte, 0, 512+len(r.Arguments)+len(r.Envelope))); ok {
		return b
	}
	b, err := json.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("executions: encoding a record: %v", err)) // every field is encodable
	}
	return b
}

// appendPlain appends the record as encoding/json would write it, if it
// is of the plain shape encode describes; ok false leaves it to
// encoding/json (dst is then garbage).
func (r *Record) appendPlain(dst []byte) (_ []byte, ok bool) {
	if r.Principal != nil || r.Batch != nil || r.Wait != nil || r.Resume != nil || r.Approval != nil || r.Lineage != nil ||
		!plainRaw(r.Arguments) || !plainRaw(r.Envelope) {
		return nil, false
	}
	if !plainString(r.ID) || !plainString(r.Caller) || !plainString(r.Kind) || !plainString(r.Tool) || !plainString(r.CalledAs) ||
		!plainString(r.ArgsSHA256) || !plainString(r.ConfirmToken) || !plainString(r.RequestID) || !plainString(string(r.Status)) ||
		!plainString(r.Replica) {
		return nil, false
	}
	dst = appendPlainField(dst, `{"id":`, r.ID)
	dst = appendPlainField(dst, `,"caller":`, r.Caller)
	dst = appendPlainField(dst, `,"kind":`, r.Kind)
	if r.Tool != "" {
		dst = appendPlainField(dst, `,"tool":`, r.Tool)
	}
	if r.CalledAs != "" {
		dst = appendPlainField(dst, `,"called_as":`, r.CalledAs)
	}
	if len(r.Arguments) > 0 {
		dst = append(append(dst, `,"arguments":`...), r.Arguments...)
	}
	if r.AuditAfter {
		dst = append(dst, `,"audit_after":true`...)
	}
	if r.ArgsSHA256 != "" {
		dst = appendPlainField(dst, `,"args_sha256":`, r.ArgsSHA256)
	}
	if r.TimeoutMS != 0 {
		dst = strconv.AppendInt(append(dst, `,"timeout_ms":`...), r.TimeoutMS, 10)
	}
	if r.ConfirmToken != "" {
		dst = appendPlainField(dst, `,"confirm_token":`, r.ConfirmToken)
	}
	dst = appendPlainField(dst, `,"request_id":`, r.RequestID)
	dst = appendPlainField(dst, `,"status":`, string(r.Status))
	if len(r.Envelope) > 0 {
		dst = append(append(dst, `,"envelope":`...), r.Envelope...)
	}
	if r.Quiet {
		dst = append(dst, `,"quiet":true`...)
	}
	if r.Replica != "" {
		dst = appendPlainField(dst, `,"replica":`, r.Replica)
	}
	if r.Attempt != 0 {
		dst = strconv.AppendInt(append(dst, `,"attempt":`...), int64(r.Attempt), 10)
	}
	if r.CancelRequested {
		dst = append(dst, `,"cancel_requested":true`...)
	}
	dst = strconv.AppendInt(append(dst, `,"step":`...), int64(r.Step), 10)
	if r.Confirmed {
		dst = append(dst, `,"confirmed":true`...)
	}
	if len(r.Trace) > 0 {
		keys := make([]string, 0, len(r.Trace))
		for k, v := range r.Trace {
			if !plainString(k) || !plainString(v) {
				return nil, false
			}
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = append(dst, `,"trace":{`...)
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendPlainField(append(append(append(dst, '"'), k...), '"'), ":", r.Trace[k])
		}
		dst = append(dst, '}')
	}
	var timeOK bool
	if dst, timeOK = appendTime(append(dst, `,"created_at":`...), r.CreatedAt); !timeOK {
		return nil, false
	}
	if !r.StartedAt.IsZero() {
		if dst, timeOK = appendTime(append(dst, `,"started_at":`...), r.StartedAt); !timeOK {
			return nil, false
		}
	}
	if dst, timeOK = appendTime(append(dst, `,"updated_at":`...), r.UpdatedAt); !timeOK {
		return nil, false
	}
	return append(dst, '}'), true
}

// appendPlainField appends a member's opening and a plain string.
func appendPlainField(dst []byte, open, s string) []byte {
	dst = append(dst, open...)
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// appendTime appends t as encoding/json does (RFC 3339 with nanoseconds,
// quoted); ok false for a year encoding/json refuses.
func appendTime(dst []byte, t time.Time) ([]byte, bool) {
	if y := t.Year(); y < 0 || y > 9999 {
		return nil, false
	}
	dst = append(dst, '"')
	dst = t.AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"'), true
}

// plainString reports whether encoding/json writes s as it is, quoted:
// printable ASCII without a quote, a backslash or what it escapes for
// HTML (<, >, &).
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&':
			return false
		}
	}
	return true
}

// plainRaw reports whether encoding/json writes a RawMessage as it is:
// compact (no space outside strings) and holding nothing it escapes for
// HTML (<, >, &, U+2028, U+2029). The value is one this service wrote or
// checked as it accepted the call.
func plainRaw(b []byte) bool {
	in := false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '\\':
			i++ // the escaped byte (only inside a string, in valid JSON)
		case '"':
			in = !in
		case ' ', '\t', '\n', '\r':
			if !in {
				return false
			}
		case '<', '>', '&':
			return false
		case 0xE2: // U+2028 and U+2029 are E2 80 A8 and E2 80 A9
			if i+2 < len(b) && b[i+1] == 0x80 && (b[i+2] == 0xA8 || b[i+2] == 0xA9) {
				return false
			}
		}
	}
	return !in
}

// appendWork appends the work message for a record, body its encoding, at
// rev: what json.Marshal(work{Key, Revision, Record, Step}) writes, without
// encoding/json's pass over body (compacting a record that encode wrote
// compact already: ~10µs of a queued call's acceptance). Keys are a
// hash and an id, plain ASCII; strictjson escapes any other as JSON.
// body is never empty: encode wrote it.
func appendWork(dst []byte, key string, rev uint64, body []byte, step int) []byte {
	dst = strictjson.AppendString(append(dst, `{"key":`...), key)
	dst = strconv.AppendUint(append(dst, `,"rev":`...), rev, 10)
	dst = append(append(dst, `,"record":`...), body...)
	if step != 0 {
		dst = strconv.AppendInt(append(dst, `,"step":`...), int64(step), 10)
	}
	return append(dst, '}')
}
