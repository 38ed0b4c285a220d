package boltstate_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/boltstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state/statetest"
)

// harness makes each case's state in a file of its own.
type harness struct {
	path string
}

func newHarness(_ context.Context, t *testing.T) (statetest.Harness, error) {
	return &harness{path: filepath.Join(t.TempDir(), "state", "agbot.db")}, nil
}

func (h *harness) MakeState(context.Context) (state.Backend, error) {
	st, _, err := boltstate.Open(h.path, boltstate.Options{})
	if err != nil {
		return nil, err // not a nil *State in a non-nil Backend
	}
	return st, nil
}

func (h *harness) Reopen(ctx context.Context, st state.Backend) (state.Backend, error) {
	// Every durable case reopens: check the file's structure and indexes
	// each time.
	if err := boltstate.Check(ctx, st); err != nil {
		return nil, err
	}
	if err := st.Close(); err != nil {
		return nil, err
	}
	st, _, err := boltstate.Open(h.path, boltstate.Options{})
	if err != nil {
		return nil, err // not a nil *State in a non-nil Backend
	}
	return st, nil
}

func (h *harness) StoredBytes(context.Context, state.Backend) ([]byte, error) {
	return os.ReadFile(h.path)
}

func (h *harness) Close() {}

func TestConformance(t *testing.T) {
	statetest.Run(t, newHarness, statetest.Options{Durable: true})
}
