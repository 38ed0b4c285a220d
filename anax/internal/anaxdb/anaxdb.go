// Package anaxdb opens anax's own agbot databases for tests: the PostgreSQL
// one (agreementbot/persistence/postgresql) on a real throwaway server from
// internal/testkit/pgtest, and the bolt one (agreementbot/persistence/bolt)
// in a temporary directory. Both are anax's code, unmodified, initialised
// through their Initialize with a config as anax's main gives it.
//
// anax's bolt database stubs every managed-secret function
// (persistence/bolt/secrets.go: AddManagedPolicySecret, SetSecretUpdate,
// GetPoliciesWithUpdatedSecrets… return nil or empty lists), so only the
// PostgreSQL database lets anax's secret updater notice a rotation.
package anaxdb

import (
	"net"
	"net/url"
	"testing"

	"github.com/open-horizon/anax/agreementbot/persistence"
	"github.com/open-horizon/anax/agreementbot/persistence/bolt"
	"github.com/open-horizon/anax/agreementbot/persistence/postgresql"
	"github.com/open-horizon/anax/config"

	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
)

// partitionStale is anax's default (config.GetPartitionStale); a non-zero
// value is part of what IsPostgresqlConfigured requires.
const partitionStale = 60

// PostgresConfig returns the agbot config section that points anax at db:
// its host, port, superuser and password, without TLS (pgtest serves
// loopback only).
func PostgresConfig(t testing.TB, db *pgtest.Database) config.PostgresqlConfig {
	t.Helper()
	u, err := url.Parse(db.URL)
	if err != nil {
		t.Fatalf("anaxdb: the database URL does not parse") // the URL holds the password: not quoted
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		t.Fatalf("anaxdb: the database address %q has no port: %v", u.Host, err)
	}
	pw, _ := u.User.Password()
	return config.PostgresqlConfig{
		Host:               host,
		Port:               port,
		User:               u.User.Username(),
		Password:           pw,
		DBName:             db.Name,
		SSLMode:            "disable",
		MaxOpenConnections: 4,
	}
}

// Postgres creates a fresh database on srv and returns anax's PostgreSQL
// agbot database initialised on it (tables, partition, migrations), closed
// when t ends.
func Postgres(t testing.TB, srv *pgtest.Server) persistence.AgbotDatabase {
	t.Helper()
	cfg := &config.HorizonConfig{}
	cfg.AgreementBot.Postgresql = PostgresConfig(t, srv.CreateDatabase(t))
	cfg.AgreementBot.PartitionStale = partitionStale
	if !cfg.IsPostgresqlConfigured() {
		t.Fatalf("anaxdb: anax does not see the PostgreSQL config as configured")
	}
	// A fresh instance rather than persistence.InitDatabase's registered
	// singleton, so that tests do not share one.
	db := new(postgresql.AgbotPostgresqlDB)
	if err := db.Initialize(cfg); err != nil {
		t.Fatalf("anaxdb: initialising anax's PostgreSQL agbot database: %v", err)
	}
	t.Cleanup(db.Close)
	return db
}

// Bolt returns anax's bolt agbot database in a temporary directory, closed
// when t ends.
func Bolt(t testing.TB) persistence.AgbotDatabase {
	t.Helper()
	cfg := &config.HorizonConfig{}
	cfg.AgreementBot.DBPath = t.TempDir()
	if !cfg.IsBoltDBConfigured() {
		t.Fatalf("anaxdb: anax does not see the bolt config as configured")
	}
	db := new(bolt.AgbotBoltDB)
	if err := db.Initialize(cfg); err != nil {
		t.Fatalf("anaxdb: initialising anax's bolt agbot database: %v", err)
	}
	t.Cleanup(db.Close)
	return db
}
