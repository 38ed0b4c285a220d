package scalefleet

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/internal/testkit"
	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
)

// CPU measures what the scale benchmarks report: the CPU time of this
// process (the agbots) and, when DB is set, of the PostgreSQL server
// (all its processes).
type CPU struct {
	DB *pgtest.Server
}

// Usage is CPU time: the agbots' and the database's.
type Usage struct{ Agbot, DB time.Duration }

// Add returns u plus v.
func (u Usage) Add(v Usage) Usage { return Usage{u.Agbot + v.Agbot, u.DB + v.DB} }

// Now returns the CPU time used so far.
func (c CPU) Now(b *testing.B) Usage {
	u := Usage{Agbot: testkit.ProcessCPU(b)}
	if c.DB != nil {
		var err error
		u.DB, err = c.DB.CPUTime()
		require.NoError(b, err)
	}
	return u
}

// Since returns the CPU time used since start (a Now), divided by per.
func (c CPU) Since(b *testing.B, start Usage, per int) Usage {
	now := c.Now(b)
	return Usage{(now.Agbot - start.Agbot) / time.Duration(per), (now.DB - start.DB) / time.Duration(per)}
}

// Report reports u as the CPU of one unit (an interval, a rotation): the
// agbots' (agbot-cpu-ms/unit), the database's (db-cpu-ms/unit, with a
// server) and both together (cpu-ms/unit).
func (c CPU) Report(b *testing.B, u Usage, unit string) {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(u.Agbot), "agbot-cpu-ms/"+unit)
	if c.DB != nil {
		b.ReportMetric(ms(u.DB), "db-cpu-ms/"+unit)
	}
	b.ReportMetric(ms(u.Agbot+u.DB), "cpu-ms/"+unit)
}

// Settle brings a database just loaded with a fleet to a steady state
// before an idle fleet is measured: its tables vacuumed and analysed, as
// autovacuum would have done by then, and the loading's writes
// checkpointed (otherwise the server's checkpointer writes them out while
// the idle work is measured).
func Settle(b *testing.B, db *pgtest.Database) {
	for _, sql := range []string{
		"VACUUM (ANALYZE) edgesecrets_delivery.agreements, edgesecrets_delivery.bindings, edgesecrets_delivery.bound_names, edgesecrets_delivery.observations",
		"CHECKPOINT",
	} {
		_, err := db.Pool(b).Exec(b.Context(), sql)
		require.NoError(b, err)
	}
}
