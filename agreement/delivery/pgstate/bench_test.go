package pgstate_test

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/boltstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/pgstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
)

// The benchmarks compare the PostgreSQL state with the embedded one on
// what the engine does most: store a batch of records (Update), and claim
// a batch of due records then store them (Due, then Update). Run them
// side by side:
//
//	go test -run '^$' -bench . -benchmem ./agreement/delivery/pgstate/
//
// Both keep fsync on: the embedded file syncs each commit, the server its
// write-ahead log.

const (
	benchRecords = 10_000
	benchBatch   = 64
	benchNames   = 50
)

type stateMaker struct {
	name string
	// open returns a fresh State for member ids, one per id sharing the
	// storage (the embedded state: one, ignoring ids).
	open func(b *testing.B, ids ...string) []state.Backend
}

func stateMakers() []stateMaker {
	return []stateMaker{
		{"state=bolt", func(b *testing.B, ids ...string) []state.Backend {
			st, _, err := boltstate.Open(filepath.Join(b.TempDir(), "agbot.db"), boltstate.Options{})
			require.NoError(b, err)
			b.Cleanup(func() { _ = st.Close() })
			return []state.Backend{st}
		}},
		{"state=postgres", func(b *testing.B, ids ...string) []state.Backend {
			db := pgtest.NewDatabase(b)
			var out []state.Backend
			for _, m := range joinAll(b, db.URL, pgstate.Options{LeasePeriod: time.Hour}, ids...) {
				out = append(out, m.sharedState)
			}
			return out
		}},
	}
}

// fill creates benchRecords records bound to benchNames names, due at
// next, and returns them as stored.
func fillRecords(b *testing.B, st state.Backend, next time.Time) []*state.Record {
	names := storeNames(benchNames)
	recs := make([]*state.Record, benchRecords)
	var wg sync.WaitGroup
	const writers = 8
	for w := range writers {
		wg.Go(func() {
			for i := w; i < benchRecords; i += writers {
				r := newRecord(fmt.Sprintf("agr-%05d", i), next, names[i%benchNames], names[(i+1)%benchNames])
				if err := st.Create(b.Context(), r); err != nil {
					b.Error(err)
					return
				}
				recs[i] = r
			}
		})
	}
	wg.Wait()
	return recs
}

// BenchmarkUpdateBatch stores batches of benchBatch records.
func BenchmarkUpdateBatch(b *testing.B) {
	for _, mk := range stateMakers() {
		b.Run(mk.name, func(b *testing.B) {
			st := mk.open(b, "agbot-1")[0]
			recs := fillRecords(b, st, time.Time{})
			b.ResetTimer()
			next := 0
			for b.Loop() {
				batch := recs[next : next+benchBatch]
				next = (next + benchBatch) % (benchRecords - benchBatch)
				for _, r := range batch {
					r.Attempts++
				}
				if err := st.Update(b.Context(), "agbot-1", batch...); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkDueAndUpdate claims batches of due records and stores each
// batch with a later NextAttempt, as the engine's reconcile loop does,
// with one member or two claiming at once.
func BenchmarkDueAndUpdate(b *testing.B) {
	for _, mk := range stateMakers() {
		for _, members := range []int{1, 2} {
			if members > 1 && mk.name == "state=bolt" {
				continue // one process owns the file
			}
			b.Run(fmt.Sprintf("%s/members=%d", mk.name, members), func(b *testing.B) {
				ids := memberIDs(members)
				states := mk.open(b, ids...)
				fillRecords(b, states[0], time.Now())
				b.ResetTimer()
				// The members claim and store b.N batches in all. A stored
				// record is due again at once, behind the others, so the
				// batches go round the records.
				var (
					mu      sync.Mutex
					batches int
					total   int
					wg      sync.WaitGroup
				)
				for i, st := range states {
					wg.Go(func() {
						for {
							mu.Lock()
							if batches >= b.N {
								mu.Unlock()
								return
							}
							batches++
							mu.Unlock()
							now := time.Now()
							recs, err := st.Due(b.Context(), ids[i], now, time.Minute, benchBatch)
							if err != nil {
								b.Error(err)
								return
							}
							for j := range recs {
								recs[j].NextAttempt = now
								recs[j].Attempts++
							}
							if err := st.Update(b.Context(), ids[i], slicePtrs(recs)...); err != nil {
								b.Error(err)
								return
							}
							mu.Lock()
							total += len(recs)
							mu.Unlock()
						}
					})
				}
				wg.Wait()
				b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "records/s")
			})
		}
	}
}
