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
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
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
			o.OnCancel = func(ctx context.Context, id string, _ state.Cancellation) {
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
		assert.ErrorIs(t, err, state.ErrNotFound, "removed once the hook returned")
	})
}

// The cancel hook of an agreement whose agent acknowledges the
// cancellation before the hook returned still finds its record, and the
// record is removed once the hook returned. Before, the acknowledgement
// removed it at once: the agbot's hook, no longer finding it, waited for
// the revoked secret alone (a later write of the binding's other
// candidate never deployed the node again), and a crash between the
// acknowledgement and the hook's return lost the hook's call for good.
func TestTheCancelHookFindsTheRecordOfACancellationTheAgentAcknowledged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu    sync.Mutex
			found []delivery.Status
			errs  []error
			h     *harness
		)
		h = newHarness(t, func(o *delivery.Options) {
			o.OnCancel = func(ctx context.Context, id string, _ state.Cancellation) {
				time.Sleep(4 * testInterval) // the agent acknowledges meanwhile
				st, err := h.engine.Status(ctx, id)
				mu.Lock()
				defer mu.Unlock()
				found, errs = append(found, st), append(errs, err)
			}
		})
		agent := h.deployOne()
		defer h.stop()
		h.delete("org/db")
		time.Sleep(testGrace + 8*testInterval)
		synctest.Wait()

		_, held := agent.file("agr-1", "pw")
		assert.False(t, held, "the agent removed the secret")
		mu.Lock()
		require.Len(t, errs, 1, "the hook is called once")
		require.NoError(t, errs[0], "the hook finds the record")
		assert.Equal(t, "node-1", found[0].Node)
		assert.Equal(t, []string{"org/db"}, found[0].Services[0].Secrets["pw"].StoreNames, "the binding's candidates")
		assert.Equal(t, state.PhaseCancelled, found[0].Phase, "acknowledged, kept for the hook")
		require.NotNil(t, found[0].Cancel)
		assert.False(t, found[0].Cancel.Notified, "a restart now would call the hook again")
		mu.Unlock()
		cycles(2)
		_, err := h.engine.Status(context.Background(), "agr-1")
		assert.ErrorIs(t, err, state.ErrNotFound, "removed once the hook returned")
	})
}
