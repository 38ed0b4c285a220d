package pgstate_test

import (
	"os"
	"testing"

	"github.com/edgesecrets/edgesecrets/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
