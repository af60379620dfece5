package events

import "crypto/sha256"

// SignForTest signs as the chain does, for tests that play an attacker
// holding some key.
func SignForTest(s *Signer, hash [sha256.Size]byte, from uint64) string { return s.sign(hash, from) }
