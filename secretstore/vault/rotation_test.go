package vault_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/internal/vaulttest"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/vault"
)

// acceptingAgents is an agreement.Transport whose agents accept every
// update; it keeps what each agreement was sent.
type acceptingAgents struct {
	mu   sync.Mutex
	sent map[string][]agreement.Update
}

func (a *acceptingAgents) Deliver(_ context.Context, d agreement.Delivery) (agreement.Reply, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sent[d.Update.AgreementID] = append(a.sent[d.Update.AgreementID], d.Update)
	return agreement.Reply{Version: agreement.MessageVersion, AgreementID: d.Update.AgreementID, Accepted: true}, nil
}

func (a *acceptingAgents) updates(id string) []agreement.Update {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.sent[id])
}

// The agbot's rotation path on a real Vault server: the watcher, the
// tracker and the outbox. Rotating 2 of 5 secrets bound by 25 agreements
// sends exactly the affected agreements one update each with the new
// values, for one store read, and one read of Vault's data endpoint, per
// rotated secret: the tracker's reads go through the coalescing reader,
// and the watcher's cycles read metadata only.
//
// The test runs the watcher's cycles itself (Poll), so that both rotations
// fall in one cycle: with a ticking watcher a cycle could see one write
// and not the other, and the agreements bound to both would rightly get
// two updates. TestWatcherOnVault covers the ticking watcher.
func TestRotationThroughVault(t *testing.T) {
	const agreements, secrets = 25, 5
	rotated := []int{1, 3}
	srv := vaulttest.Shared(t)
	cfg := rootConfig(srv, srv.EnableKV(t, 2))
	admin := open(t, cfg) // writes as an administrator would, outside the agbot's counts
	requests := &recorder{keep: true}
	agbotStore := open(t, cfg, vault.WrapTransport(requests.wrap))
	mon := secretstore.NewMonitor(agbotStore)
	reader := secretstore.NewReader(mon, secretstore.ReaderOptions{TTL: time.Hour})

	name := func(i int) string { return fmt.Sprintf("org/app/secret%d", i) }
	for i := range secrets {
		put(t, admin, name(i), d("value", name(i)+"@v1"), nil)
	}
	// Agreement i binds web's "db" and "api" to two of the secrets; the 25
	// agreements cover every pair.
	bound := func(i int) map[string]string {
		return map[string]string{"db": name(i % secrets), "api": name(i / secrets % secrets)}
	}

	agents := &acceptingAgents{sent: map[string][]agreement.Update{}}
	outbox, err := agreement.NewOutbox(t.Context(), agents, agreement.OutboxOptions{})
	require.NoError(t, err)
	watcher, err := secretstore.NewWatcher(mon, secretstore.WatcherOptions{})
	require.NoError(t, err)
	tracker, err := agreement.NewTracker(agreement.TrackerOptions{
		Reader: reader, Watcher: watcher, Outbox: outbox,
		Cancel: func(_ context.Context, id string, r agreement.Revocation) {
			t.Errorf("agreement %s cancelled: %s %s", id, r.VaultSecret, r.Kind)
		},
	})
	require.NoError(t, err)
	t.Cleanup(tracker.Close)

	// Each proposal read its secrets through the reader; the agreement is
	// registered with the tags of what its agent was sent.
	for i := range agreements {
		sb := agreement.ServiceBinding{Service: agreement.ServiceRef{Org: "org", URL: "web"}, Secrets: map[string]agreement.BoundSecret{}}
		for secret, vaultSecret := range bound(i) {
			s, err := reader.Get(t.Context(), vaultSecret)
			require.NoError(t, err)
			sb.Secrets[secret] = agreement.BoundSecret{VaultSecret: vaultSecret, Sent: s.ContentTag()}
		}
		require.NoError(t, tracker.Register(fmt.Sprintf("ag%02d", i), []agreement.ServiceBinding{sb}))
	}
	require.EqualValues(t, secrets, mon.Stats()[secretstore.OpGet].Calls, "proposals: one read per distinct secret")

	outboxCtx, stopOutbox := context.WithCancel(context.Background())
	outboxDone := make(chan error, 1)
	go func() { outboxDone <- outbox.Run(outboxCtx) }()
	t.Cleanup(func() {
		stopOutbox()
		assert.ErrorIs(t, <-outboxDone, context.Canceled)
	})
	cycle := func() []secretstore.Event {
		events := watcher.Poll(t.Context()).Events
		tracker.HandleEvents(t.Context(), events)
		return events
	}
	baseline := cycle()
	require.Len(t, baseline, secrets, "the baseline: each secret appeared")
	for _, e := range baseline {
		assert.Equal(t, secretstore.Appeared, e.Kind, "%v", e)
	}
	require.Empty(t, outbox.Records(), "agents hold what the store holds: no update")

	readsBefore := mon.Stats()[secretstore.OpGet].Calls
	requests.takePaths()
	rotatedNames := map[string]bool{}
	for _, i := range rotated {
		rotatedNames[name(i)] = true
		put(t, admin, name(i), d("value", name(i)+"@v2"), nil)
	}
	want := map[string]map[string]string{} // agreement → service secret → new value
	for i := range agreements {
		for secret, vaultSecret := range bound(i) {
			if rotatedNames[vaultSecret] {
				id := fmt.Sprintf("ag%02d", i)
				if want[id] == nil {
					want[id] = map[string]string{}
				}
				want[id][secret] = vaultSecret + "@v2"
			}
		}
	}
	require.Len(t, want, 16, "the 25 pairs but the 9 of unrotated secrets")

	var changed []string
	for _, e := range cycle() {
		require.Equal(t, secretstore.Changed, e.Kind, "%v", e)
		changed = append(changed, e.Name)
	}
	require.ElementsMatch(t, slices.Collect(maps.Keys(rotatedNames)), changed, "one cycle sees both rotations")
	require.Eventually(t, func() bool {
		recs := outbox.Records()
		if len(recs) != len(want) {
			return false
		}
		for _, r := range recs {
			if r.Status != agreement.StatusAccepted {
				return false
			}
		}
		return true
	}, 30*time.Second, 10*time.Millisecond, "every affected agreement's update is accepted")
	require.Empty(t, cycle(), "one more cycle: nothing new")

	got := map[string]map[string]string{}
	for i := range agreements {
		id := fmt.Sprintf("ag%02d", i)
		ups := agents.updates(id)
		if _, affected := want[id]; !affected {
			assert.Empty(t, ups, "agreement %s uses no rotated secret", id)
			continue
		}
		require.Len(t, ups, 1, "agreement %s gets exactly one update", id)
		su, err := ups[0].Secrets()
		require.NoError(t, err)
		require.Len(t, su.Services, 1)
		got[id] = map[string]string{}
		for secret, details := range su.Services[0].Secrets {
			got[id][secret] = string(details.Data["value"])
		}
	}
	assert.Equal(t, want, got, "each update carries only the rotated secrets, with their new values")

	assert.LessOrEqual(t, mon.Stats()[secretstore.OpGet].Calls-readsBefore, int64(len(rotated)), "store reads for the rotation")
	var dataReads []string
	for _, p := range requests.takePaths() {
		if strings.HasPrefix(p, http.MethodGet+" ") && strings.Contains(p, "/data/") {
			dataReads = append(dataReads, p)
		}
	}
	assert.LessOrEqual(t, len(dataReads), len(rotated), "Vault data reads for the rotation: %v", dataReads)
}
