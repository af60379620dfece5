package dispatch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"
)

// The output budget (Spec.MaxResultBytes, Stages.MaxResultBytes): a
// result over its tool's budget is answered with a head that fits, cut by
// the output sanitizer with markers saying how much each cut value lost,
// and the whole — sanitized by the same pass, so a secret past the head is
// redacted in it too — is kept as an artifact of the call, owned by the
// call's principal, which the envelope links (Envelope.Artifact). It is a
// stage of the pipeline, so every way in (REST, batch, async, MCP) and
// every record (an execution's envelope) carries the head, never more.

// Artifacts keeps the whole of results over budget (the state store's
// object store). Put stores data as the artifact id of owner (the
// caller's name) and says when the store lets it go.
type Artifacts interface {
	Put(ctx context.Context, owner, id string, data []byte) (expires time.Time, err error)
}

// ArtifactPath is where the owner of an artifact reads it over HTTP.
const ArtifactPath = "/artifacts/"

// budget is the call's result budget in bytes; zero or less: none.
func (c *call) budget() int {
	b := c.entry.Spec.MaxResultBytes
	if b == 0 {
		b = c.st.MaxResultBytes
	}
	return int(max(b, 0))
}

// owner is who an artifact of the call belongs to: its caller's name, as
// the server authenticates it (auth.Anonymous's without credentials).
func (c *call) owner() string {
	if c.req.Caller == "" {
		return "anonymous"
	}
	return c.req.Caller
}

// keep stores the whole of a result cut at its budget, on the worker
// (the caller may have been answered already), and links it from o. A
// result that cannot be kept is still answered with its head, saying so.
func (d *Dispatcher) keep(ctx context.Context, c *call, o *outcome) {
	if o.whole == nil {
		return
	}
	whole := o.whole
	o.whole = nil
	if d.opts.Artifacts == nil {
		if c.budget() > 0 { // cut by the output cap alone: as before budgets, nothing to say
			o.report.Notes = append(o.report.Notes, "the result was cut to its budget; the whole is not kept (toold runs without a state store)")
		}
		return
	}
	id := newArtifactID()
	expires, err := d.opts.Artifacts.Put(ctx, c.owner(), id, whole)
	if err != nil {
		d.log.Warn("a result over its budget could not be kept", append(c.logFields(), zap.String("tool", c.entry.Spec.Name),
			zap.String("request_id", c.req.RequestID), zap.Error(err))...)
		o.report.Notes = append(o.report.Notes, "the result was cut to its budget; the whole could not be kept (the state store failed), retry for it")
		return
	}
	o.artifact = &Artifact{ID: id, URI: ArtifactPath + id, Bytes: int64(len(whole)),
		OmittedBytes: int64(max(len(whole)-len(o.data), 0)), ExpiresAt: expires.UTC()}
	o.report.Notes = append(o.report.Notes, fmt.Sprintf("the result was %d bytes, over its budget: data is a head of it; "+
		"the whole is kept at %s (artifact) until %s", len(whole), o.artifact.URI, o.artifact.ExpiresAt.Format(time.RFC3339)))
}

// newArtifactID is 128 random bits: an artifact's name, never guessable.
func newArtifactID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return artifactPrefix + hex.EncodeToString(b[:])
}

const artifactPrefix = "art_"

// ValidArtifactID reports whether id has the form of an artifact's id
// ("art_" and 32 lowercase hex digits), so a route or an MCP resource
// read never sends anything else to the store.
func ValidArtifactID(id string) bool {
	hexPart, ok := strings.CutPrefix(id, artifactPrefix)
	if !ok || len(hexPart) != 32 {
		return false
	}
	for _, c := range []byte(hexPart) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
