package awssm_test

import (
	"fmt"
	"testing"

	"github.com/edgesecrets/edgesecrets/secretstore/awssm"
)

// BenchmarkRead compares reading 40 secrets one Get at a time with one
// GetBatch, over loopback HTTP with SigV4 verification. It reports the
// Secrets Manager calls per secret read beside the time.
func BenchmarkRead(b *testing.B) {
	const n = 40
	for _, mode := range []string{"GetEach", "GetBatch"} {
		b.Run(mode, func(b *testing.B) {
			e := newEnv(b)
			s := e.store(awssm.Options{Scope: "bench"})
			var names []string
			for i := range n {
				name := fmt.Sprintf("s%02d", i)
				names = append(names, name)
				e.put(s, name, d("user", "u", "pass", "p"), map[string]string{"team": "edge"})
			}
			e.srv.ResetCounters()
			b.ResetTimer()
			for b.Loop() {
				if mode == "GetBatch" {
					got, err := s.GetBatch(b.Context(), names)
					if err != nil || len(got) != n {
						b.Fatal(err)
					}
					continue
				}
				for _, name := range names {
					if _, err := s.Get(b.Context(), name); err != nil {
						b.Fatal(err)
					}
				}
			}
			var calls int64
			for _, c := range e.srv.AllCalls() {
				calls += c
			}
			b.ReportMetric(float64(calls)/float64(b.N*n), "calls/secret")
		})
	}
}
