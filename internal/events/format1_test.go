package events

import (
	"crypto/sha256"
	"encoding/hex"
)

// toold writes format 2 (auditblock.go); the verifier still reads format
// 1, which tests write with this, as toold once did.

// seal fills rec.Prev and rec.Hash, and with a signer the signature that
// vouches for records from..rec.Seq, and appends its line (no newline) to
// dst: the record up to its hash is hashed as written, then the hash (and
// signature) are written in place of the closing brace.
func seal(dst []byte, rec *Record, prev string, signer *Signer, from uint64) []byte {
	rec.Prev, rec.Hash, rec.SignedFrom, rec.KeyID, rec.Sig = prev, "", 0, "", ""
	start := len(dst)
	dst = appendRecord(dst, rec, true) // ends with "prev":"..."}
	sum := sha256.Sum256(dst[start:])
	rec.Hash = hex.EncodeToString(sum[:])
	if signer != nil {
		rec.SignedFrom, rec.KeyID, rec.Sig = from, signer.KeyID(), signer.sign(sum, from, 1)
	}
	return appendSeal(dst[:len(dst)-1], rec)
}
