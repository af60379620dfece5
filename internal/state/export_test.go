package state

// Confirmations is the bucket behind SpentTokens, for tests of its TTLs.
func (s *Store) Confirmations() *Bucket { return s.confirmations }
