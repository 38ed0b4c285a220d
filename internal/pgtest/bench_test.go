package pgtest_test

import (
	"testing"

	"github.com/edgesecrets/edgesecrets/internal/pgtest"
)

// The cost of each way to get a server or a database, for the report:
//
//	go test -run - -bench . -benchtime 10x ./internal/pgtest/

// BenchmarkStartClose: a dedicated server from the cached template, until
// it accepts logins, then closed (immediate shutdown, files removed).
func BenchmarkStartClose(b *testing.B) {
	for b.Loop() {
		srv := pgtest.Start(b, pgtest.Options{})
		if err := srv.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRestart: a fast shutdown (Stop) or a crash (Kill), then a
// start on the same data, with crash recovery after Kill.
func BenchmarkRestart(b *testing.B) {
	for name, halt := range map[string]func(*pgtest.Server) error{
		"Stop": (*pgtest.Server).Stop,
		"Kill": (*pgtest.Server).Kill,
	} {
		b.Run(name, func(b *testing.B) {
			srv := pgtest.Start(b, pgtest.Options{})
			for b.Loop() {
				if err := halt(srv); err != nil {
					b.Fatal(err)
				}
				if err := srv.Start(b.Context()); err != nil {
					b.Fatal(err)
				}
			}
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
