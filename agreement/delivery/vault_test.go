package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/vault/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/internal/testkit/vaulttest"
	"github.com/edgesecrets/edgesecrets/mock"
	"github.com/edgesecrets/edgesecrets/secretstore/vault"
)

func TestMain(m *testing.M) { os.Exit(vaulttest.Main(m)) }

// vaultPolicy lets a token read and write every secret of mount, and deny
// any of the names; it returns the policy's name.
func vaultPolicy(t *testing.T, root *api.Client, mount, name string, deny ...string) string {
	t.Helper()
	hcl := fmt.Sprintf(`
path "%[1]s/data/*" { capabilities = ["create", "read", "update"] }
path "%[1]s/metadata/*" { capabilities = ["read", "list", "update"] }
`, mount)
	for _, n := range deny {
		hcl += fmt.Sprintf(`
path "%[1]s/data/%[2]s" { capabilities = ["deny"] }
path "%[1]s/metadata/%[2]s" { capabilities = ["deny"] }
`, mount, n)
	}
	require.NoError(t, root.Sys().PutPolicyWithContext(t.Context(), name, hcl))
	return name
}

// vaultHarness is a harness whose engine reads a real Vault dev server with
// a token of policy, given to the store through an environment variable
// (which it can neither renew past its max TTL nor replace), and polls it
// every second.
func vaultHarness(t *testing.T, mount, token string, grace time.Duration) *harness {
	t.Helper()
	srv := vaulttest.Shared(t)
	env := "EDGESECRETS_DELIVERY_TEST_TOKEN"
	t.Setenv(env, token)
	s, err := vault.New(t.Context(), vault.Config{Address: srv.Addr, Mount: mount, KVVersion: "2",
		Auth: vault.Auth{Method: "token", TokenEnv: env}}, vault.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	h := newHarness(t, func(o *delivery.Options) {
		o.Interval, o.Grace, o.InitialDelay, o.MaxDelay, o.ReplyTimeout = time.Second, grace, 100*time.Millisecond, time.Second, 5*time.Second
	})
	h.store = mock.NewStore(s)
	h.opts.Store = h.store.Store
	h.engine, err = delivery.New(h.opts)
	require.NoError(t, err)
	return h
}

// eventually polls cond every 100 ms until it holds or within passes.
func eventually(t *testing.T, within time.Duration, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The failure on a real Vault: the agbot's token, from an
// environment variable, reaches its max TTL; every name answers 403. No
// agreement is cancelled, even without a grace period, and Health names the
// cause.
func TestVaultTokenExpiryCancelsNothing(t *testing.T) {
	srv := vaulttest.Shared(t)
	root := srv.Client(t)
	mount := srv.EnableKV(t, 2)
	policy := vaultPolicy(t, root, mount, "delivery-expiry")
	renewable := true
	tok, err := root.Auth().Token().CreateWithContext(t.Context(), &api.TokenCreateRequest{
		Policies: []string{policy}, TTL: "2s", ExplicitMaxTTL: "6s", Renewable: &renewable,
	})
	require.NoError(t, err)
	h := vaultHarness(t, mount, tok.Auth.ClientToken, delivery.NoGrace)
	agents := setupThree(h)
	defer h.stop()

	eventually(t, 30*time.Second, func() bool {
		return strings.Contains(h.engine.Health(context.Background()).StoreProblem, "rejects the agbot's own credentials")
	}, "health reports the token's end")
	time.Sleep(3 * time.Second) // three more cycles, every name forbidden
	health := h.engine.Health(context.Background())
	assert.Contains(t, health.StoreProblem, "expired", "health names the cause")
	assert.NotContains(t, health.StoreProblem, tok.Auth.ClientToken)
	assert.Empty(t, h.cancelled(), "zero cancellations")
	for _, x := range []string{"a", "b", "c"} {
		st := h.status("agr-" + x)
		assert.Equal(t, state.PhaseActive, st.Phase)
		assert.Nil(t, st.Held)
		got, _ := agents[x].file("agr-"+x, "pw")
		assert.Equal(t, jsonFile(canary+x), got, "the node keeps its secret")
	}
	assert.NotContains(t, h.logs.String(), tok.Auth.ClientToken, "no token in the logs")
}

// One secret's read permission removed on a real Vault while the others
// stay readable: only its agreements are cancelled, and only after the
// grace period.
func TestVaultOneSecretForbiddenCancelsOnlyItsAgreements(t *testing.T) {
	const grace = 3 * time.Second
	srv := vaulttest.Shared(t)
	root := srv.Client(t)
	mount := srv.EnableKV(t, 2)
	policy := vaultPolicy(t, root, mount, "delivery-one-forbidden")
	tok, err := root.Auth().Token().CreateWithContext(t.Context(), &api.TokenCreateRequest{Policies: []string{policy}, TTL: "1h"})
	require.NoError(t, err)
	h := vaultHarness(t, mount, tok.Auth.ClientToken, grace)
	agents := setupThree(h)
	defer h.stop()

	revoked := time.Now()
	vaultPolicy(t, root, mount, policy, "org/b")
	eventually(t, 30*time.Second, func() bool { return len(h.cancelled()["agr-b"]) > 0 }, "agr-b cancelled")
	c := h.cancelled()["agr-b"][0]
	assert.Equal(t, state.Forbidden, c.Kind)
	assert.Equal(t, "org/b", c.StoreName)
	assert.GreaterOrEqual(t, c.DecidedAt.Sub(revoked), grace, "not before the grace period")
	eventually(t, 30*time.Second, func() bool {
		_, err := h.engine.Status(context.Background(), "agr-b")
		return errors.Is(err, state.ErrNotFound)
	}, "the agent acknowledged the cancellation")
	_, held := agents["b"].file("agr-b", "pw")
	assert.False(t, held, "its files are wiped")

	time.Sleep(2 * time.Second)
	assert.Equal(t, []string{"agr-b"}, keys(h.cancelled()), "only its agreements")
	assert.Len(t, h.cancelled()["agr-b"], 1, "once")
	for _, x := range []string{"a", "c"} {
		assert.True(t, h.status("agr-"+x).InSync)
		got, _ := agents[x].file("agr-"+x, "pw")
		assert.Equal(t, jsonFile(canary+x), got)
	}
	assert.Empty(t, h.engine.Health(context.Background()).StoreProblem)
}

// A rotation through a real Vault server: rotating 2 of 5 secrets bound by
// 25 agreements sends exactly the affected agreements one update each,
// with the new values, for one store read per rotated secret (the values
// are read through the coalescing reader when the updates are sealed; the
// watcher's cycles read metadata only). Cycles run on demand, so that both
// rotations fall in one cycle.
func TestVaultRotationReadsEachRotatedSecretOnce(t *testing.T) {
	const agreements, secrets = 25, 5
	srv := vaulttest.Shared(t)
	root := srv.Client(t)
	mount := srv.EnableKV(t, 2)
	policy := vaultPolicy(t, root, mount, "delivery-rotation")
	tok, err := root.Auth().Token().CreateWithContext(t.Context(), &api.TokenCreateRequest{Policies: []string{policy}, TTL: "1h"})
	require.NoError(t, err)
	h := vaultHarness(t, mount, tok.Auth.ClientToken, delivery.NoGrace)
	h.opts.Interval = time.Hour // cycles only when the test triggers them
	h.engine, err = delivery.New(h.opts)
	require.NoError(t, err)

	name := func(i int) string { return fmt.Sprintf("org/app/secret%d", i) }
	for i := range secrets {
		h.put(name(i), canary+name(i)+"@v1")
	}
	agents := map[string]*testAgent{}
	for i := range agreements {
		id := fmt.Sprintf("agr-%02d", i)
		agents[id] = h.agent(fmt.Sprintf("node-%02d", i))
		h.register(id, fmt.Sprintf("node-%02d", i), name(i%secrets))
	}
	h.start()
	defer h.stop()
	for id := range agents {
		h.wait(id, time.Minute)
	}
	updates := func(a *testAgent) int {
		n := 0
		for _, m := range a.messages() {
			if m.Type == agreement.TypeUpdate {
				n++
			}
		}
		return n
	}
	readsBefore := len(h.store.Calls("get", ""))

	rotated := map[string]bool{name(1): true, name(3): true}
	for n := range rotated {
		h.put(n, canary+n+"@v2")
	}
	h.engine.TriggerCycle()
	for i := range agreements {
		id := fmt.Sprintf("agr-%02d", i)
		n := name(i % secrets)
		if !rotated[n] {
			continue
		}
		eventually(t, time.Minute, func() bool {
			got, _ := agents[id].file(id, "pw")
			return got == jsonFile(canary+n+"@v2")
		}, id+" holds the new value")
	}
	h.engine.TriggerCycle() // one more cycle: nothing new
	time.Sleep(time.Second)

	for i := range agreements {
		id := fmt.Sprintf("agr-%02d", i)
		if rotated[name(i%secrets)] {
			assert.Equal(t, 1, updates(agents[id]), "agreement %s gets exactly one update", id)
		} else {
			assert.Zero(t, updates(agents[id]), "agreement %s uses no rotated secret", id)
		}
	}
	reads := len(h.store.Calls("get", "")) - readsBefore
	assert.Positive(t, reads, "the new values were read")
	assert.LessOrEqual(t, reads, len(rotated), "store reads for the rotation: one per rotated secret")
	assert.Empty(t, h.cancelled())
}
