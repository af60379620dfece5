package events

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
)

// Format 2 of the audit log seals an append's records as one block. Each
// record is a line of its own, "v":2 first; the block's last line ends
// with the link, the hash and the signature:
//
//	{"v":2,"seq":7,...,"request_id":"a"}
//	{"v":2,"seq":8,...,"request_id":"b","prev":"<hash of the block before>","hash":"<this block's>","signed_from":7,"kid":"…","sig":"…"}
//
// The block's hash is the SHA-256 of its lines joined by newlines, the
// last one up to and including prev (closed with "}", as format 1 hashes a
// record); the signature signs that hash and the block's first record
// number, under a domain of its own ("toold audit v2"). So every record
// stays chained — each is in its block's hash, and each block names the
// hash of the one before — and an edit anywhere, a record removed from a
// block (also a gap in the numbers), a block removed (its successor's prev
// no longer matches), or a re-sealed block (its signature) is found as in
// format 1. What it saves per record is format 1's own hash, its prev and
// hash fields (~150 bytes a record) and a hash finalization: the records
// of a busy flush share one.

// FormatVersion is the format of the records toold appends.
const FormatVersion = 2

// sealBlock writes recs (numbered already) as one format 2 block chained
// to prev, signed, and fills the last record's Prev, Hash and signature.
// Lines are separated by newlines; the last has none.
func (c *chain) sealBlock(dst []byte, recs []Record, prev string) []byte {
	if c.hasher == nil {
		c.hasher = sha256.New()
	}
	h := c.hasher
	h.Reset()
	last := len(recs) - 1
	for i := range recs {
		rec := &recs[i]
		rec.V, rec.Prev, rec.Hash, rec.SignedFrom, rec.KeyID, rec.Sig = FormatVersion, "", "", 0, "", ""
		if i == last {
			rec.Prev = prev
		}
		start := len(dst)
		dst = appendRecord(dst, rec, i == last)
		h.Write(dst[start:])
		if i < last {
			dst = append(dst, '\n')
			h.Write(newline)
		}
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	rec := &recs[last]
	rec.Hash = hex.EncodeToString(sum[:])
	rec.SignedFrom, rec.KeyID, rec.Sig = recs[0].Seq, c.signer.KeyID(), c.signer.sign(sum, recs[0].Seq, FormatVersion)
	return appendSeal(dst[:len(dst)-1], rec)
}

var newline = []byte{'\n'}

// openBlock checks a format 2 block's lines (the last one sealed) against
// its hash and returns its records; the last holds the block's Prev, Hash
// and signature, which is the verifier's to check (it needs the keys).
// With an error it returns the records it could read, if all of them:
// their numbers still say what was removed before the block.
func openBlock(lines [][]byte) ([]Record, error) {
	recs := make([]Record, len(lines))
	for i, line := range lines {
		if err := json.Unmarshal(line, &recs[i]); err != nil {
			return nil, fmt.Errorf("line %d of the block is not a record: %v", i+1, err)
		}
		if recs[i].V != FormatVersion {
			return nil, fmt.Errorf("line %d of the block is not a format %d record", i+1, FormatVersion)
		}
		if i > 0 && recs[i].Seq != recs[i-1].Seq+1 {
			return recs, fmt.Errorf("record %d follows record %d inside a block: %d record(s) removed",
				recs[i].Seq, recs[i-1].Seq, int64(recs[i].Seq)-int64(recs[i-1].Seq)-1)
		}
		if i < len(lines)-1 && (recs[i].Hash != "" || recs[i].Prev != "" || recs[i].signed()) {
			return recs, fmt.Errorf("record %d carries a seal inside a block", recs[i].Seq)
		}
	}
	last := &recs[len(recs)-1]
	suffix := appendSeal(nil, last)
	sealed := lines[len(lines)-1]
	if last.Hash == "" || !bytes.HasSuffix(sealed, suffix) {
		return recs, errors.New("the block's last record does not end with its hash")
	}
	h := sha256.New()
	for _, line := range lines[:len(lines)-1] {
		h.Write(line)
		h.Write(newline)
	}
	h.Write(sealed[:len(sealed)-len(suffix)])
	h.Write([]byte{'}'})
	if hex.EncodeToString(h.Sum(nil)) != last.Hash {
		return recs, fmt.Errorf("records %d to %d do not match their block's hash: one was altered", recs[0].Seq, last.Seq)
	}
	return recs, nil
}

// lastRecord is the last record of an append's lines, its hash checked:
// format 1's last record, or format 2's block seal.
func lastRecord(lines [][]byte) (Record, error) {
	if len(lines) == 0 {
		return Record{}, nil
	}
	var v struct {
		V int `json:"v"`
	}
	if err := json.Unmarshal(lines[len(lines)-1], &v); err != nil || v.V != FormatVersion {
		return openLine(lines[len(lines)-1])
	}
	recs, err := openBlock(lines)
	if err != nil {
		return Record{}, err
	}
	return recs[len(recs)-1], nil
}
