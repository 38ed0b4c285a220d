package awssm_test

import (
	"testing"

	"github.com/edgesecrets/edgesecrets/secretstore/awssm"
	"github.com/edgesecrets/edgesecrets/secretstore/storetest"
)

// TestConformance runs the shared suite with the real SDK client against the
// wire-level endpoint, once with a recovery window (deleted names are
// restored by the next Put) and once with forced deletion.
func TestConformance(t *testing.T) {
	const pageSize = 5
	for _, c := range []struct {
		name string
		opts awssm.Options
	}{
		{"RecoveryWindow", awssm.Options{Scope: "conformance", RecoveryWindowDays: 7, ListPageSize: pageSize}},
		{"ForceDelete", awssm.Options{Scope: "conformance", ForceDelete: true, ListPageSize: pageSize}},
	} {
		t.Run(c.name, func(t *testing.T) {
			storetest.Run(t, harnessMaker(c.opts), storetest.Options{ListPageSize: pageSize})
		})
	}
}
