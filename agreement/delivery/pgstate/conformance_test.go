package pgstate_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/pgstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state/statetest"
	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
)

// suiteMember is the member id the conformance suite names in its calls
// of Names and PutObservations; the harness joins it, as an engine does
// before its first cycle.
const suiteMember = "member-1"

// harness gives each case a schema of its own in one database (a fresh
// database per case costs a checkpoint each).
type harness struct {
	t      *testing.T
	db     *pgtest.Database
	schema string
}

func harnessMaker(db *pgtest.Database) statetest.HarnessMaker {
	var cases atomic.Int64
	return func(_ context.Context, t *testing.T) (statetest.Harness, error) {
		return &harness{t: t, db: db, schema: fmt.Sprintf("case_%d", cases.Add(1))}, nil
	}
}

func (h *harness) MakeState(ctx context.Context) (state.Backend, error) {
	st, _, err := pgstate.Open(ctx, pgstate.Options{URL: h.db.URL, Schema: h.schema})
	if err != nil {
		return nil, err
	}
	if _, err := st.Join(ctx, suiteMember); err != nil {
		_ = st.Close()
		return nil, err
	}
	return st, nil
}

func (h *harness) Reopen(ctx context.Context, st state.Backend) (state.Backend, error) {
	if err := st.Close(); err != nil {
		return nil, err
	}
	return h.MakeState(ctx)
}

func (h *harness) StoredBytes(context.Context, state.Backend) ([]byte, error) {
	return []byte(h.db.Dump(h.t)), nil
}

func (h *harness) Close() {}

func TestConformance(t *testing.T) {
	statetest.Run(t, harnessMaker(pgtest.NewDatabase(t)), statetest.Options{Durable: true, Shared: true})
}
