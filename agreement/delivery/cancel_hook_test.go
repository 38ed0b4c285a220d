package delivery_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement/delivery"
)

// The cancel hook of an agreement whose agent was never sent anything
// still finds its record (the agbot's hook reads it with Status for the
// node and every candidate of the revoked binding, which its wait for the
// secret names): the record is removed once the hook returned, not as
// soon as it is due, and a crash in between calls the hook again. Seed
// 161 of three agbots: the record was gone when the hook asked, the wait
// named the revoked secret alone, and when the binding's other candidate
// was written the node was never deployed again.
func TestTheCancelHookOfAnAgreementNeverSentFindsItsRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu    sync.Mutex
			found []error
			h     *harness
		)
		h = newHarness(t, func(o *delivery.Options) {
			o.OnCancel = func(ctx context.Context, id string, _ delivery.Cancellation) {
				time.Sleep(2 * testInterval) // the reconcile loop runs meanwhile
				_, err := h.engine.Status(ctx, id)
				mu.Lock()
				defer mu.Unlock()
				found = append(found, err)
			}
		})
		h.put("org/db", canary+"v1")
		h.register("agr-1", "node-1", "org/db") // no agent: nothing is ever sent
		h.start()
		defer h.stop()
		cycles(2)
		h.delete("org/db")
		time.Sleep(testGrace + 4*testInterval)
		synctest.Wait()

		mu.Lock()
		require.Len(t, found, 1, "the hook is called once")
		assert.NoError(t, found[0], "the hook finds the record")
		mu.Unlock()
		cycles(2)
		_, err := h.engine.Status(context.Background(), "agr-1")
		assert.ErrorIs(t, err, delivery.ErrNotFound, "removed once the hook returned")
	})
}
