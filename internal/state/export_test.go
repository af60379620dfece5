package state

// Confirmations is the bucket behind SpentTokens, for tests of its TTLs.
func (s *Store) Confirmations() *Bucket { return s.confirmations }

// LeaderReads is b reading as a replicated bucket does, from the stream's
// leader (the message get a single server answers too).
func (s *Store) LeaderReads(b *Bucket) *Bucket {
	c := *b
	c.nc = s.nc
	return &c
}
