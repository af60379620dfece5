package state

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ArtifactsBucket is the object store of results over their tool's
// budget (max_result_bytes): the whole of each, as the output sanitizer
// left it, kept for the artifacts' retention under its owner's prefix.
const ArtifactsBucket = "toold_artifacts"

// Artifact limits' defaults: as long as execution records are kept, and
// 256 MiB in all (an artifact past that is not kept; its call is answered
// with the head and says so).
const (
	DefaultArtifactsRetention = 24 * time.Hour
	DefaultArtifactsMaxBytes  = 256 << 20
)

func (s *Store) artifactsBucket(ctx context.Context) (jetstream.ObjectStore, error) {
	o := s.opts
	obs, err := s.js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: ArtifactsBucket,
		Description: "toold results over their budget, kept whole", TTL: o.ArtifactsRetention,
		MaxBytes: o.ArtifactsMaxBytes, Storage: jetstream.FileStorage, Replicas: o.Replicas})
	if err != nil {
		return nil, fmt.Errorf("object store %s: %w", ArtifactsBucket, err)
	}
	return obs, nil
}

// Artifacts is the store's object store of results kept whole. Each
// artifact is named by its owner (a caller's name, hashed as execution
// records' keys are) and its id: only its owner finds it; anyone else, as
// for an id that never was, finds nothing.
type Artifacts struct {
	js        jetstream.JetStream
	obs       jetstream.ObjectStore
	m         *metrics
	retention time.Duration
}

// Artifacts returns the store's artifacts; nil for a store opened
// Existing, or one without room for them (see provision).
func (s *Store) Artifacts() *Artifacts {
	if s.artifacts == nil {
		return nil
	}
	return &Artifacts{js: s.js, obs: s.artifacts, m: s.metrics, retention: s.opts.ArtifactsRetention}
}

func artifactName(owner, id string) string { return OwnerPrefix(owner) + "." + id }

// Put keeps data as owner's artifact id, and says until when the store
// keeps it. A store at its limit refuses it (ErrFull).
func (a *Artifacts) Put(ctx context.Context, owner, id string, data []byte) (time.Time, error) {
	start := time.Now()
	_, err := a.obs.PutBytes(ctx, artifactName(owner, id), data)
	err = classify(err)
	a.m.observe("artifact_put", start, err)
	if err != nil {
		return time.Time{}, err
	}
	return start.Add(a.retention), nil
}

// ArtifactReader reads one artifact, from any offset: Seek positions it,
// so http.ServeContent answers ranged requests with it. A read near the
// start reads the object from its start, checking its digest when it
// reads to the end; a read from further in starts at the chunk that holds
// its offset (chunksFrom).
type ArtifactReader struct {
	a    *Artifacts
	ctx  context.Context
	name string
	info *jetstream.ObjectInfo // its size, time and chunks, as Open found it
	pos  int64
	r    io.ReadCloser // open at r's offset, or nil
	at   int64         // offset r reads next
}

// farRead is the offset from which a read starts at its chunk rather than
// reading the object from its start: past it, skipping the chunks before
// by their headers costs less than reading them.
const farRead = 512 << 10

// Open finds owner's artifact id: ErrNotFound when it does not exist,
// expired, or is someone else's. The reader reads within ctx; Close it.
func (a *Artifacts) Open(ctx context.Context, owner, id string) (*ArtifactReader, error) {
	start := time.Now()
	name := artifactName(owner, id)
	info, err := a.obs.GetInfo(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		err = ErrNotFound
	}
	err = classify(err)
	a.m.observe("artifact_info", start, err)
	if err != nil {
		return nil, err
	}
	return &ArtifactReader{a: a, ctx: ctx, name: name, info: info}, nil
}

// Size is the artifact's length in bytes; ModTime when it was kept.
func (r *ArtifactReader) Size() int64        { return int64(r.info.Size) }
func (r *ArtifactReader) ModTime() time.Time { return r.info.ModTime }

// Seek sets where the next Read starts.
func (r *ArtifactReader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += r.pos
	case io.SeekEnd:
		offset += r.Size()
	default:
		return 0, errors.New("artifact: bad whence")
	}
	if offset < 0 {
		return 0, errors.New("artifact: negative position")
	}
	r.pos = offset
	return offset, nil
}

// Read reads from the position Seek set: from the open object when it is
// there already or ahead of it (skipping forward), else from a new read
// of it that skips up to it. Ranges in ascending order are one read.
func (r *ArtifactReader) Read(p []byte) (int, error) {
	if r.pos >= r.Size() {
		return 0, io.EOF
	}
	if r.r != nil && r.pos > r.at {
		if _, err := io.CopyN(io.Discard, r.r, r.pos-r.at); err != nil {
			r.closeObject()
			return 0, classify(err)
		}
		r.at = r.pos
	}
	if r.r != nil && r.at != r.pos {
		r.closeObject()
	}
	if r.r == nil {
		if err := r.open(); err != nil {
			return 0, err
		}
	}
	n, err := r.r.Read(p)
	r.pos += int64(n)
	r.at = r.pos
	if err != nil && !errors.Is(err, io.EOF) {
		err = classify(err)
	}
	return n, err
}

// open starts a read of the object at r.pos.
func (r *ArtifactReader) open() error {
	start := time.Now()
	if r.pos >= farRead {
		rc, err := r.a.chunksFrom(r.ctx, r.info, r.pos)
		err = classify(err)
		r.a.m.observe("artifact_get", start, err)
		if err != nil {
			return err
		}
		r.r, r.at = rc, r.pos
		return nil
	}
	obj, err := r.a.obs.Get(r.ctx, r.name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		err = ErrNotFound // it expired since Open
	}
	err = classify(err)
	r.a.m.observe("artifact_get", start, err)
	if err != nil {
		return err
	}
	if _, err := io.CopyN(io.Discard, obj, r.pos); err != nil {
		_ = obj.Close()
		return classify(err)
	}
	r.r, r.at = obj, r.pos
	return nil
}

// chunksFrom reads the object info describes from offset off, starting at
// the chunk that holds it. An object is a run of chunk messages on its
// own subject of the bucket's stream; a headers-only consumer on that
// subject says each chunk's size and stream sequence without its bytes,
// so the chunks before off are skipped by their headers, and a second
// consumer reads from the chunk that holds off.
func (a *Artifacts) chunksFrom(ctx context.Context, info *jetstream.ObjectInfo, off int64) (io.ReadCloser, error) {
	stream := "OBJ_" + ArtifactsBucket
	subject := "$O." + ArtifactsBucket + ".C." + info.NUID
	heads, err := a.js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}, HeadersOnly: true})
	if err != nil {
		return nil, err
	}
	// A chunk subject with no messages is an artifact that expired since
	// Open: said at once, not after a wait for chunks that will not come.
	if ci, err := heads.Info(ctx); err != nil {
		return nil, err
	} else if ci.NumPending == 0 {
		return nil, ErrNotFound
	}
	it, err := heads.Messages()
	if err != nil {
		return nil, err
	}
	defer it.Stop()
	var at int64 // offset of the chunk m
	var seq uint64
	for range info.Chunks {
		m, err := nextChunk(ctx, it)
		if err != nil {
			return nil, err
		}
		n, err := strconv.ParseInt(m.Headers().Get(nats.MsgSize), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("artifact chunk without its size: %w", err)
		}
		if at+n > off {
			md, err := m.Metadata()
			if err != nil {
				return nil, err
			}
			seq = md.Sequence.Stream
			break
		}
		at += n
	}
	if seq == 0 {
		return nil, ErrNotFound // fewer chunks than the object had: it went since Open
	}
	data, err := a.js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject},
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: seq})
	if err != nil {
		return nil, err
	}
	msgs, err := data.Messages(jetstream.PullMaxMessages(4))
	if err != nil {
		return nil, err
	}
	return &chunkReader{ctx: ctx, it: msgs, skip: off - at, left: int64(info.Size) - at}, nil
}

// chunkReader reads an object's chunks from a consumer: left bytes, the
// first skip of them dropped.
type chunkReader struct {
	ctx        context.Context
	it         jetstream.MessagesContext
	buf        []byte
	skip, left int64
}

func (c *chunkReader) Read(p []byte) (int, error) {
	for len(c.buf) == 0 {
		if c.left <= 0 {
			return 0, io.EOF
		}
		m, err := nextChunk(c.ctx, c.it)
		if err != nil {
			return 0, classify(err)
		}
		c.buf = m.Data()
		c.left -= int64(len(c.buf))
		if c.skip > 0 {
			k := min(c.skip, int64(len(c.buf)))
			c.buf, c.skip = c.buf[k:], c.skip-k
		}
	}
	n := copy(p, c.buf)
	c.buf = c.buf[n:]
	return n, nil
}

// chunkWait bounds the wait for one chunk of an artifact: one that
// expires while it is read ends the read, instead of holding it until
// the caller gives up.
const chunkWait = 10 * time.Second

// nextChunk is it's next message, within ctx and chunkWait.
func nextChunk(ctx context.Context, it jetstream.MessagesContext) (jetstream.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, chunkWait)
	defer cancel()
	return it.Next(jetstream.NextContext(ctx))
}

func (c *chunkReader) Close() error {
	c.it.Stop()
	return nil
}

func (r *ArtifactReader) closeObject() {
	if r.r != nil {
		_ = r.r.Close()
		r.r = nil
	}
}

// Close ends any read in progress.
func (r *ArtifactReader) Close() error {
	r.closeObject()
	return nil
}

// OwnerPrefix is the key or name prefix of what belongs to a caller (its
// execution records, its artifacts): the caller's name hashed, so keys
// hold no caller's name and one caller's prefix is never another's.
func OwnerPrefix(caller string) string {
	sum := sha256.Sum256([]byte(caller))
	return hex.EncodeToString(sum[:8])
}

// ReadRange reads at most n bytes of owner's artifact id from offset
// off, and says how long the whole is: ErrNotFound as Open.
func (a *Artifacts) ReadRange(ctx context.Context, owner, id string, off, n int64) ([]byte, int64, error) {
	ar, err := a.Open(ctx, owner, id)
	if err != nil {
		return nil, 0, err
	}
	defer ar.Close()
	size := ar.Size()
	if off >= size {
		return nil, size, nil
	}
	if _, err := ar.Seek(off, io.SeekStart); err != nil {
		return nil, size, err
	}
	buf := make([]byte, min(n, size-off))
	if _, err := io.ReadFull(ar, buf); err != nil {
		return nil, size, err
	}
	return buf, size, nil
}
