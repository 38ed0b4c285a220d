package identity

import (
	"context"
	"sync"
	"testing"

	"github.com/edgesecrets/edgesecrets"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMemoryCertStoreCompareAndSet(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryCertStore()
	_, err := s.Get(ctx, testID.Provider, testID.InstanceID)
	require.ErrorIs(t, err, edgesecrets.ErrNotFound)

	rec, err := s.Put(ctx, Record{Instance: testID, CurrentSerial: "a"})
	require.NoError(t, err)
	assert.Equal(t, uint64(1), rec.Revision)

	_, err = s.Put(ctx, Record{Instance: testID, CurrentSerial: "x"})
	require.ErrorIs(t, err, edgesecrets.ErrConflict, "revision 0 means create; the record exists")

	rec.CurrentSerial, rec.PreviousSerial = "b", "a"
	rec2, err := s.Put(ctx, rec)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), rec2.Revision)

	_, err = s.Put(ctx, rec) // still revision 1
	require.ErrorIs(t, err, edgesecrets.ErrConflict)

	got, err := s.Get(ctx, testID.Provider, testID.InstanceID)
	require.NoError(t, err)
	assert.Equal(t, rec2, got)

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.Get(canceled, testID.Provider, testID.InstanceID)
	assert.ErrorIs(t, err, context.Canceled)
	_, err = s.Put(canceled, got)
	assert.ErrorIs(t, err, context.Canceled)
}

// TestConcurrentRefreshesNeverRevoke: refreshes racing with the same
// certificate each succeed or lose the compare-and-set; none is mistaken
// for a clone.
func TestConcurrentRefreshesNeverRevoke(t *testing.T) {
	h := newHub(t)
	k := newAgentKeys(t)
	a := h.register(t, k, testID)
	const n = 8
	reqs := make([]*refreshBody, n)
	for i := range reqs {
		reqs[i] = refreshRequest(t, k, testID, a, now())
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { _, errs[i] = h.refresh(context.Background(), testID, reqs[i]) })
	}
	wg.Wait()
	wins := 0
	for _, err := range errs {
		if err == nil {
			wins++
			continue
		}
		assert.ErrorIs(t, err, edgesecrets.ErrConflict)
	}
	assert.GreaterOrEqual(t, wins, 1)
	rec := h.record(t, testID)
	assert.False(t, rec.Revoked)
	assert.Equal(t, a.Serial, rec.PreviousSerial)
}
