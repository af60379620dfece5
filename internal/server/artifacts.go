package server

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/state"
	"github.com/toold/toold/internal/tools"
)

// getArtifact is GET /artifacts/{id}: the whole of a result that its call
// answered with a head (the envelope's artifact), to the caller who made
// the call — the same key, or a token's same principal; anyone else finds
// nothing, as for an id that never was. The bytes are the whole result as
// the output sanitizer left it. http.ServeContent answers Range (one or
// several ranges, If-Range, 416), so a client pages through a large result.
func (s *Server) getArtifact(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if !dispatch.ValidArtifactID(id) {
		s.refuse(w, r, "", dispatch.StatusNotFound, noArtifact())
		return
	}
	p, ok := s.chargedCaller(w, r)
	if !ok {
		return
	}
	if s.opts.Store == nil {
		s.refuse(w, r, "", dispatch.StatusNotFound, noArtifact().
			WithSuggestion("toold runs without a state store (state.enabled: false), so no result is kept whole"))
		return
	}
	a := s.opts.Store.Artifacts()
	ar, err := a.Open(r.Context(), p.Name, id)
	switch {
	case errors.Is(err, state.ErrNotFound):
		s.refuse(w, r, "", dispatch.StatusNotFound, noArtifact())
		return
	case err != nil:
		s.send(w, r, s.errorReply(r, "", storeError(err)))
		return
	}
	defer ar.Close()
	if n := strings.Count(r.Header.Get("Range"), ","); n >= maxRanges {
		// Each range of a multipart answer is a read of the object: a
		// header of thousands would be thousands of reads.
		w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", ar.Size()))
		s.send(w, r, s.envelopeReply(dispatch.Failure(info(r).id, "", dispatch.StatusRejected,
			tools.Errorf(tools.ValidationError, "the Range header asks for %d ranges; at most %d are read at once", n+1, maxRanges).
				WithCode(tools.CodeInvalidRange).WithSuggestion("ask for fewer, larger ranges, or send no Range for the whole")),
			http.StatusRequestedRangeNotSatisfiable))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	// The result is its caller's: no shared cache keeps it.
	h.Set("Cache-Control", "private, no-store")
	h.Set("ETag", `"`+id+`"`) // an artifact never changes: If-Range can name it
	http.ServeContent(&rangeRefusal{ResponseWriter: w, s: s, r: r, size: ar.Size()}, r, "", ar.ModTime(), ar)
}

// rangeRefusal answers ServeContent's 416 (a Range past the end, or not a
// range at all) with an envelope that says what to send, as every other
// refusal is, keeping its Content-Range (bytes */SIZE); the plain text
// ServeContent writes after it is dropped.
type rangeRefusal struct {
	http.ResponseWriter
	s       *Server
	r       *http.Request
	size    int64
	refused bool
}

func (w *rangeRefusal) WriteHeader(code int) {
	if code != http.StatusRequestedRangeNotSatisfiable {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	w.refused = true
	w.Header().Del("X-Content-Type-Options")
	te := tools.Errorf(tools.ValidationError, "the Range header %q names no byte range within the artifact, which is %d bytes", w.r.Header.Get("Range"), w.size).
		WithCode(tools.CodeInvalidRange).
		WithSuggestion("ask for bytes=0-%d or a part of it (bytes=START-END, bytes=START-, bytes=-LAST), or send no Range for the whole", max(w.size-1, 0))
	env := dispatch.Failure(info(w.r).id, "", dispatch.StatusRejected, te)
	w.s.send(w.ResponseWriter, w.r, w.s.envelopeReply(env, http.StatusRequestedRangeNotSatisfiable))
}

func (w *rangeRefusal) Write(p []byte) (int, error) {
	if w.refused {
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

// maxRanges bounds the ranges of one GET /artifacts/{id}.
const maxRanges = 16

func noArtifact() *tools.Error {
	return tools.Errorf(tools.NotFound, "there is no artifact with that id for this caller; it may have expired").
		WithCode(tools.CodeNoArtifact).
		WithSuggestion("an artifact is read by the caller whose call made it, with the same key or token, until the envelope's artifact.expires_at; run the call again for a new one")
}
