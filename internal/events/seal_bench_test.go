package events

import (
	"testing"
	"time"
)

// BenchmarkSeal is what an append costs the flusher per record: a batch of
// 64 records sealed into the chain, in format 1 unsigned (the hash chain
// alone, as before issue 16) and signed (one ed25519 signature at the
// batch's end), and in format 2 (the batch one block: one hash, one
// signature). Run: go test -run '^$' -bench BenchmarkSeal ./internal/events
func BenchmarkSeal(b *testing.B) {
	recs := make([]Record, 64)
	for i := range recs {
		recs[i] = Record{Seq: uint64(i + 1), Time: time.Now().UTC(), Replica: "replica-a", Kind: "call", Caller: "agent",
			Action: "execute", Tool: "read_file", ArgsSHA256: "08db9ffd245600566515d1a3cdad531ab18f1ef908817a3d995acd42e5c66419",
			Status: "success", DurationMS: 1.25, RequestID: "c0cdb0b9d098aa896866155e"}
	}
	signer := GenerateSigner()
	b.Run("format2", func(b *testing.B) {
		c := &chain{signer: signer}
		var buf []byte
		b.ReportAllocs()
		for b.Loop() {
			buf = c.sealBlock(buf[:0], recs, "")
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(recs)), "ns/record")
		b.ReportMetric(float64(len(buf))/float64(len(recs)), "bytes/record")
	})
	for _, tt := range []struct {
		name   string
		signer *Signer
	}{{"format1-unsigned", nil}, {"format1-signed", signer}} {
		b.Run(tt.name, func(b *testing.B) {
			var buf []byte
			b.ReportAllocs()
			for b.Loop() {
				buf = buf[:0]
				prev := ""
				for i := range recs {
					var s *Signer
					if i == len(recs)-1 {
						s = tt.signer
					}
					buf = append(seal(buf, &recs[i], prev, s, 1), '\n')
					prev = recs[i].Hash
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(recs)), "ns/record")
			b.ReportMetric(float64(len(buf))/float64(len(recs)), "bytes/record")
		})
	}
}
