package boltstate_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/boltstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/statetest"
)

// harness makes each case's state in a file of its own.
type harness struct {
	path string
}

func newHarness(_ context.Context, t *testing.T) (statetest.Harness, error) {
	return &harness{path: filepath.Join(t.TempDir(), "state", "agbot.db")}, nil
}

func (h *harness) MakeState(context.Context) (delivery.State, error) {
	st, _, err := boltstate.Open(h.path, boltstate.Options{})
	return st, err
}

func (h *harness) Reopen(ctx context.Context, st delivery.State) (delivery.State, error) {
	// Every durable case reopens: check the file's structure and indexes
	// each time.
	if err := boltstate.Check(ctx, st); err != nil {
		return nil, err
	}
	if err := st.Close(); err != nil {
		return nil, err
	}
	st, _, err := boltstate.Open(h.path, boltstate.Options{})
	return st, err
}

func (h *harness) StoredBytes(context.Context, delivery.State) ([]byte, error) {
	return os.ReadFile(h.path)
}

func (h *harness) Close() {}

func TestConformance(t *testing.T) {
	statetest.Run(t, newHarness, statetest.Options{Durable: true})
}
