package boltstate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// Run side by side, for ratios:
//
//	go test -run '^$' -bench . -benchmem ./agreement/delivery/boltstate/

// benchRecord is a typical agreement: one service with two secrets, each
// bound to a node-level and an organisation-level name, delivered and
// acknowledged.
func benchRecord(i int) *state.Record {
	node := fmt.Sprintf("org/node-%06d", i)
	tag, _ := secretstore.ParseContentTag("version:3")
	r := &state.Record{
		ID: fmt.Sprintf("agr-%06d-5f0c1e2a9b7d4c3e8f6a1b2c3d4e5f60", i), Node: node, Phase: state.PhaseActive,
		Proposed: true, AgentKey: agreement.KeyID("hpke-x25519:3b1f0e9a7c5d2e4f"), Epoch: 2, Counter: 3, ReplySequence: 3 << 32,
		CreatedAt: time.Now(), UpdatedAt: time.Now(), LastReply: time.Now(),
	}
	sb := binding.ServiceBinding{Service: agreement.ServiceRef{Org: "org", URL: "example.com.db-client", Arch: "amd64", Version: "1.2.0"}, Secrets: map[string]binding.BoundSecret{}}
	for _, name := range []string{"db-password", "api-token"} {
		names := []string{node + "/" + name, "org/" + name}
		sb.Secrets[name] = binding.BoundSecret{StoreNames: names, Format: "json"}
		c := state.Content{StoreName: names[1], Tag: tag}
		r.Slots = append(r.Slots, state.Slot{Service: 0, Name: name, Desired: c, Acked: c})
	}
	r.Services = []binding.ServiceBinding{sb}
	return r
}

func benchState(b *testing.B) *State {
	b.Helper()
	st, _, err := Open(filepath.Join(b.TempDir(), "state.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	return st
}

// load stores n records in a few transactions, next attempts from due(i).
func load(b *testing.B, s *State, n int, due func(i int) time.Time) {
	b.Helper()
	const perTx = 10_000
	for start := 0; start < n; start += perTx {
		err := s.db.Update(func(tx *bolt.Tx) error {
			for i := start; i < min(n, start+perTx); i++ {
				r := benchRecord(i)
				r.NextAttempt = due(i)
				if _, err := createTx(tx, r, encodeRecord(r, 1)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUpdate: the writes of a fan-out to 10,000 agreements.
// "sequential" is one Update of one record per call, each its own
// commit; "concurrent" is the same from 64 goroutines, group-committed;
// "batch-1000" is one Update of 1,000 records. ns/record compares them;
// "memory" is state.NewMemory doing the concurrent case.
func BenchmarkUpdate(b *testing.B) {
	const records = 10_000
	setup := func(b *testing.B, st state.Backend) []*state.Record {
		recs := make([]*state.Record, records)
		for i := range recs {
			recs[i] = benchRecord(i)
			recs[i].Revision = 1
		}
		if s, ok := st.(*State); ok {
			load(b, s, records, func(int) time.Time { return time.Time{} })
			return recs
		}
		for _, r := range recs {
			if err := st.Create(b.Context(), r); err != nil {
				b.Fatal(err)
			}
		}
		return recs
	}
	perRecord := func(b *testing.B, n int) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/record")
	}
	sequential := func(b *testing.B, st state.Backend) {
		recs := setup(b, st)
		i := 0
		for b.Loop() {
			r := recs[i%records]
			r.Attempts++
			if err := st.Update(b.Context(), "", r); err != nil {
				b.Fatal(err)
			}
			i++
		}
		perRecord(b, i)
	}
	batch := func(b *testing.B, st state.Backend) {
		const size = 1000
		recs := setup(b, st)
		i := 0
		for b.Loop() {
			chunk := recs[(i*size)%records:][:size]
			for _, r := range chunk {
				r.Attempts++
			}
			if err := st.Update(b.Context(), "", chunk...); err != nil {
				b.Fatal(err)
			}
			i++
		}
		perRecord(b, i*size)
	}
	concurrent := func(b *testing.B, st state.Backend) {
		recs := setup(b, st)
		var next atomic.Int64
		b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				id := recs[next.Add(1)%records].ID
				for { // a compare-and-set loop, as the engine's
					cur, err := st.Get(b.Context(), id)
					if err != nil {
						b.Fatal(err)
					}
					cur.Attempts++
					err = st.Update(b.Context(), "", &cur)
					if err == nil {
						break
					}
					if !errors.Is(err, state.ErrConflict) {
						b.Fatal(err)
					}
				}
			}
		})
		perRecord(b, b.N)
	}
	b.Run("file/sequential", func(b *testing.B) { sequential(b, benchState(b)) })
	b.Run("file/concurrent", func(b *testing.B) { concurrent(b, benchState(b)) })
	b.Run("file/batch-1000", func(b *testing.B) { batch(b, benchState(b)) })
	b.Run("memory/sequential", func(b *testing.B) { sequential(b, state.NewMemory()) })
	b.Run("memory/concurrent", func(b *testing.B) { concurrent(b, state.NewMemory()) })
	b.Run("memory/batch-1000", func(b *testing.B) { batch(b, state.NewMemory()) })
}

// BenchmarkDue: Due(limit 100) with 1,000 and with 100,000 records
// stored, 1,000 of them due: the file's cost follows what Due returns,
// not what is stored. The memory state scans every record, for comparison.
func BenchmarkDue(b *testing.B) {
	now := time.Now()
	for _, n := range []int{1_000, 100_000} {
		due := func(i int) time.Time {
			if i%(n/1000) == 0 {
				return now.Add(-time.Duration(i) * time.Millisecond)
			}
			return now.Add(time.Hour + time.Duration(i)*time.Millisecond)
		}
		b.Run(fmt.Sprintf("file/records=%d", n), func(b *testing.B) {
			s := benchState(b)
			load(b, s, n, due)
			for b.Loop() {
				// A lease of 0 leaves the claimed records due: every
				// call finds 100 to return.
				if got, err := s.Due(b.Context(), "", now, 0, 100); err != nil || len(got) != 100 {
					b.Fatalf("Due: %d records, %v", len(got), err)
				}
			}
		})
		b.Run(fmt.Sprintf("memory/records=%d", n), func(b *testing.B) {
			m := state.NewMemory()
			for i := range n {
				r := benchRecord(i)
				r.NextAttempt = due(i)
				if err := m.Create(b.Context(), r); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				if got, err := m.Due(b.Context(), "", now, 0, 100); err != nil || len(got) != 100 {
					b.Fatalf("Due: %d records, %v", len(got), err)
				}
			}
		})
	}
}

// BenchmarkBytesPerRecord reports the file's size per stored record at
// 100,000 typical records (benchRecord), indexes included.
func BenchmarkBytesPerRecord(b *testing.B) {
	const n = 100_000
	for b.Loop() {
		s := benchState(b)
		load(b, s, n, func(i int) time.Time {
			if i%2 == 0 {
				return time.Now().Add(time.Duration(i) * time.Second)
			}
			return time.Time{}
		})
		fi, err := os.Stat(s.path)
		if err != nil {
			b.Fatal(err)
		}
		var used int64
		_ = s.db.View(func(tx *bolt.Tx) error { used = tx.Size(); return nil })
		b.ReportMetric(float64(used)/n, "bytes/record")
		b.ReportMetric(float64(fi.Size())/n, "file-bytes/record")
		r := benchRecord(0)
		b.ReportMetric(float64(len(encodeRecord(r, 1))), "value-bytes/record")
	}
}
