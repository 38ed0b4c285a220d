package main

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
)

// A postgres:// -state keeps the identity records in the database: what
// one agbot registered, another agbot sharing the database reads, and a
// restarted one still has.
func TestOpenStatePostgresSharesIdentityRecords(t *testing.T) {
	srv := pgtest.Start(t, pgtest.Options{})
	log := slog.New(slog.DiscardHandler)
	open := func(member string) identity.CertStore {
		st, certs, desc, err := openState(t.Context(), config{state: srv.URL, member: member, leasePeriod: time.Minute}, log)
		require.NoError(t, err)
		t.Cleanup(func() { _ = st.Close() })
		assert.NotContains(t, desc, srv.URL, "the description holds no credentials")
		return certs
	}
	a, b := open("agbot-1"), open("agbot-2")
	rec := identity.Record{Instance: identity.Identity{Provider: "p", Org: "o", Node: "n", InstanceID: "i-1"}, CurrentSerial: "0a"}
	stored, err := a.Put(t.Context(), rec)
	require.NoError(t, err)
	got, err := b.Get(t.Context(), "p", "i-1")
	require.NoError(t, err, "another agbot sharing the database knows the instance")
	assert.Equal(t, stored, got)
}
