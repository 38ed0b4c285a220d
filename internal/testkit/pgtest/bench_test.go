package pgtest_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
)

// The cost of each way to get a server or a database, for the report:
//
//	go test -run - -bench . -benchtime 5x ./internal/testkit/pgtest/

// BenchmarkStart: a dedicated server from the cached template, until it
// accepts logins (its Close, reported as close-ms/op, is not in ns/op).
func BenchmarkStart(b *testing.B) {
	var closing time.Duration
	for b.Loop() {
		srv := pgtest.Start(b, pgtest.Options{})
		b.StopTimer()
		t0 := time.Now()
		if err := srv.Close(); err != nil {
			b.Fatal(err)
		}
		closing += time.Since(t0)
		b.StartTimer()
	}
	b.ReportMetric(float64(closing.Milliseconds())/float64(b.N), "close-ms/op")
}

// BenchmarkRestart: a fast shutdown (Stop) or a crash (Kill), then a
// start on the same data, with crash recovery after Kill; the two halves
// are reported as halt-ms/op and start-ms/op.
func BenchmarkRestart(b *testing.B) {
	for name, halt := range map[string]func(*pgtest.Server) error{
		"Stop": (*pgtest.Server).Stop,
		"Kill": (*pgtest.Server).Kill,
	} {
		b.Run(name, func(b *testing.B) {
			srv := pgtest.Start(b, pgtest.Options{})
			var halting, starting time.Duration
			for b.Loop() {
				// Some writes, so that there is something to checkpoint or
				// recover. (A pool would hand out a connection the halt
				// broke.)
				conn, err := pgx.Connect(b.Context(), srv.URL)
				if err != nil {
					b.Fatal(err)
				}
				_, err = conn.Exec(b.Context(), "CREATE TABLE IF NOT EXISTS t (n int); INSERT INTO t SELECT generate_series(1, 1000)")
				conn.Close(b.Context())
				if err != nil {
					b.Fatal(err)
				}
				t0 := time.Now()
				if err := halt(srv); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := srv.Start(b.Context()); err != nil {
					b.Fatal(err)
				}
				halting += t1.Sub(t0)
				starting += time.Since(t1)
			}
			b.ReportMetric(float64(halting.Milliseconds())/float64(b.N), "halt-ms/op")
			b.ReportMetric(float64(starting.Milliseconds())/float64(b.N), "start-ms/op")
		})
	}
}

// BenchmarkNewDatabase: a fresh database on the shared server (the drops,
// when the benchmark ends, are not timed).
func BenchmarkNewDatabase(b *testing.B) {
	srv := pgtest.Shared(b)
	for b.Loop() {
		srv.CreateDatabase(b)
	}
}
