package sim_test

import (
	"os"
	"testing"

	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
)

// TestMain runs the tests and closes the PostgreSQL server of
// TestSimulationPostgres, when it started one.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
