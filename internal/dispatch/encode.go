package dispatch

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/strictjson"
)

// AppendJSON appends the envelope's JSON to dst. It writes the JSON value
// encoding/json would (a test holds them equal; only <, > and & are left
// unescaped) without reflection, and without re-validating Data, which the
// sanitizer already returned as valid JSON: the envelope is written once per
// call, so this is the hot path.
func (env *Envelope) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"request_id":`...)
	dst = strictjson.AppendString(dst, env.RequestID)
	dst = append(dst, `,"tool":`...)
	dst = strictjson.AppendString(dst, env.Tool)
	dst = append(dst, `,"status":`...)
	dst = strictjson.AppendString(dst, string(env.Status))
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
	dst = env.appendTimes(dst)
	if len(env.FallbackFrom) > 0 {
		dst = append(dst, `,"fallback_from":`...)
		dst = appendMarshal(dst, env.FallbackFrom)
	}
	if env.ExecutionID != "" {
		dst = append(dst, `,"execution_id":`...)
		dst = strictjson.AppendString(dst, env.ExecutionID)
	}
	if env.Redundant {
		dst = append(dst, `,"redundant":true`...)
	}
	if env.Waiting != nil {
		dst = append(dst, `,"waiting":`...)
		dst = appendMarshal(dst, env.Waiting)
	}
	if env.TraceID != "" {
		dst = append(dst, `,"trace_id":`...)
		dst = strictjson.AppendString(dst, env.TraceID)
	}
	dst = appendPrincipal(dst, env.Principal)
	dst = appendArtifact(dst, env.Artifact)
	return append(dst, '}')
}

// appendArtifact appends `,"artifact":{...}` when there is one.
func appendArtifact(dst []byte, a *Artifact) []byte {
	if a == nil {
		return dst
	}
	dst = append(dst, `,"artifact":`...)
	return appendMarshal(dst, a)
}

// appendPrincipal appends `,"principal":{...}` when there is one.
func appendPrincipal(dst []byte, id *auth.Identity) []byte {
	if id == nil {
		return dst
	}
	return id.AppendJSON(append(dst, `,"principal":`...), true)
}

// appendTimes appends the members duration_ms, timing, started_at and
// sanitized, each after a comma.
func (env *Envelope) appendTimes(dst []byte) []byte {
	dst = append(dst, `,"duration_ms":`...)
	dst = appendFloat(dst, env.DurationMS)
	dst = append(dst, `,"timing":{"queued_ms":`...)
	dst = appendFloat(dst, env.Timing.QueuedMS)
	dst = append(dst, `,"execute_ms":`...)
	dst = appendFloat(dst, env.Timing.ExecuteMS)
	dst = append(dst, `,"sanitize_ms":`...)
	dst = appendFloat(dst, env.Timing.SanitizeMS)
	if env.Timing.Attempts != 0 {
		dst = append(dst, `,"attempts":`...)
		dst = strconv.AppendInt(dst, int64(env.Timing.Attempts), 10)
	}
	if env.Timing.WaitMS != 0 {
		dst = append(dst, `,"wait_ms":`...)
		dst = appendFloat(dst, env.Timing.WaitMS)
	}
	dst = append(dst, `},"started_at":"`...)
	dst = env.StartedAt.AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, `","sanitized":`...)
	r := env.Sanitized
	if r.Redactions == 0 && !r.Truncated && r.OriginalBytes == 0 && len(r.ByKind) == 0 && len(r.Notes) == 0 {
		return append(dst, `{"redactions":0,"truncated":false}`...)
	}
	return appendMarshal(dst, r)
}

// AppendBookkeeping appends the envelope's bookkeeping as a JSON object:
// request_id, status, duration_ms, timing, started_at, sanitized,
// trace_id, principal and artifact — the envelope less what a transport
// carries in fields of its own (MCP: the tool, the data, the error).
func (env *Envelope) AppendBookkeeping(dst []byte) []byte {
	dst = append(dst, `{"request_id":`...)
	dst = strictjson.AppendString(dst, env.RequestID)
	dst = append(dst, `,"status":`...)
	dst = strictjson.AppendString(dst, string(env.Status))
	dst = env.appendTimes(dst)
	if env.TraceID != "" {
		dst = append(dst, `,"trace_id":`...)
		dst = strictjson.AppendString(dst, env.TraceID)
	}
	dst = appendPrincipal(dst, env.Principal)
	dst = appendArtifact(dst, env.Artifact)
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
