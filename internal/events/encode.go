package events

import (
	"strconv"
	"time"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/strictjson"
)

// The flusher writes every event and record; these appenders write the
// JSON encoding/json would for Event and Record (a test holds them equal),
// without reflection.

func appendField(dst []byte, name, v string) []byte {
	if v == "" {
		return dst
	}
	dst = append(dst, ',', '"')
	dst = append(dst, name...)
	dst = append(dst, '"', ':')
	return strictjson.AppendString(dst, v)
}

func appendTime(dst []byte, t time.Time) []byte {
	dst = append(dst, '"')
	dst = t.UTC().AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"')
}

func appendNumber(dst []byte, f float64) []byte {
	return strconv.AppendFloat(dst, f, 'f', -1, 64)
}

// appendEvent writes it as an Event; full adds what only an execution's
// own subscribers get (the final envelope).
func (r *Recorder) appendEvent(dst []byte, it *item, full bool) []byte {
	dst = append(dst, `{"type":`...)
	dst = strictjson.AppendString(dst, it.typ)
	dst = append(dst, `,"time":`...)
	dst = appendTime(dst, it.at)
	dst = appendField(dst, "replica", r.replica)
	dst = appendField(dst, "request_id", it.requestID)
	dst = appendField(dst, "tool", it.tool)
	dst = appendField(dst, "caller", it.caller)
	dst = appendIdentity(dst, it.who)
	dst = appendField(dst, "execution_id", it.execution)
	dst = appendField(dst, "status", it.status)
	dst = appendField(dst, "error_type", it.errType)
	dst = appendField(dst, "error_code", it.errCode)
	if it.durationMS != 0 {
		dst = append(dst, `,"duration_ms":`...)
		dst = appendNumber(dst, it.durationMS)
	}
	if !it.started.IsZero() && !full {
		dst = append(dst, `,"started":`...)
		dst = appendTime(dst, it.started)
		dst = append(dst, `,"coalesced":true`...)
	}
	if x := it.extra; x != nil {
		dst = appendField(dst, "stream", x.stream)
		dst = appendField(dst, "chunk", x.chunk)
		if full && len(x.envelope) > 0 {
			dst = append(dst, `,"envelope":`...)
			dst = append(dst, x.envelope...)
		}
	}
	return append(dst, '}')
}

// appendIdentity appends `,"principal":{...}` for a principal.
func appendIdentity(dst []byte, id *auth.Identity) []byte {
	if id == nil {
		return dst
	}
	return id.AppendJSON(append(dst, `,"principal":`...), false)
}

// appendRecord writes rec as a Record, without its hash: the bytes that
// are hashed. withPrev writes its link, "prev" (every format 1 record, a
// format 2 block's last).
func appendRecord(dst []byte, rec *Record, withPrev bool) []byte {
	dst = append(dst, '{')
	if rec.V != 0 {
		dst = append(dst, `"v":`...)
		dst = strconv.AppendInt(dst, int64(rec.V), 10)
		dst = append(dst, ',')
	}
	dst = append(dst, `"seq":`...)
	dst = strconv.AppendUint(dst, rec.Seq, 10)
	dst = append(dst, `,"time":`...)
	dst = appendTime(dst, rec.Time)
	dst = append(dst, `,"replica":`...)
	dst = strictjson.AppendString(dst, rec.Replica)
	dst = append(dst, `,"kind":`...)
	dst = strictjson.AppendString(dst, rec.Kind)
	dst = append(dst, `,"caller":`...)
	dst = strictjson.AppendString(dst, rec.Caller)
	dst = appendIdentity(dst, rec.Principal)
	dst = append(dst, `,"action":`...)
	dst = strictjson.AppendString(dst, rec.Action)
	dst = appendField(dst, "tool", rec.Tool)
	dst = appendField(dst, "args_sha256", rec.ArgsSHA256)
	dst = appendField(dst, "status", rec.Status)
	dst = appendField(dst, "error_type", rec.ErrorType)
	dst = append(dst, `,"duration_ms":`...)
	dst = appendNumber(dst, rec.DurationMS)
	dst = appendField(dst, "request_id", rec.RequestID)
	dst = appendField(dst, "execution_id", rec.ExecutionID)
	dst = appendField(dst, "target", rec.Target)
	dst = appendField(dst, "recovered_from", rec.RecoveredFrom)
	if withPrev {
		dst = append(dst, `,"prev":`...)
		dst = strictjson.AppendString(dst, rec.Prev)
	}
	return append(dst, '}')
}
