package delivery_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/mock"
)

// testDeployment deploys service org/svc 1.0.0, whose container declares
// the secrets named, each bound to the vault secret of the same name
// prefixed with "db" (pw → db, pw2 → db2) unless unbound, to node-1 as
// agr-1.
func testDeployment(t *testing.T, declared []string, unbound ...string) delivery.Deployment {
	t.Helper()
	var decl, binds []string
	for _, n := range declared {
		decl = append(decl, `"`+n+`": {}`)
		if !contains(unbound, n) {
			binds = append(binds, `{"`+n+`": "db`+strings.TrimPrefix(n, "pw")+`"}`)
		}
	}
	svc, err := binding.DecodeServiceDefinition(strings.NewReader(`{"org": "org", "url": "svc", "version": "1.0.0", "arch": "amd64",
		"deployment": {"services": {"web": {"image": "example/web:1", "secrets": {` + strings.Join(decl, ",") + `}}}}}`))
	require.NoError(t, err)
	policy, err := binding.DecodeDeploymentPolicy(strings.NewReader(`{
		"service": {"name": "svc", "org": "org", "arch": "amd64", "serviceVersions": [{"version": "1.0.0"}]},
		"secretBinding": [{"serviceOrgid": "org", "serviceUrl": "svc", "serviceArch": "amd64",
			"serviceVersionRange": "[1.0.0,INFINITY)", "secrets": [` + strings.Join(binds, ",") + `]}]}`))
	require.NoError(t, err)
	catalog, err := binding.NewCatalog(svc)
	require.NoError(t, err)
	return delivery.Deployment{ID: "agr-1", Node: "node-1", Org: "org", NodeID: "node-1", Target: policy, Resolver: catalog}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// registered reports whether the agreement is registered.
func (h *harness) registered(id string) bool {
	_, err := h.engine.Status(context.Background(), id)
	if errors.Is(err, state.ErrNotFound) {
		return false
	}
	require.NoError(h.t, err)
	return true
}

// waitDeployed waits (in fake time) until the agreement is registered,
// at most within, and then until its agent holds its secrets.
func (h *harness) waitDeployed(id string, within time.Duration) {
	h.t.Helper()
	deadline := time.Now().Add(within)
	for !h.registered(id) {
		require.True(h.t, time.Now().Before(deadline), "agreement %s not registered within %s", id, within)
		time.Sleep(time.Second)
	}
	h.wait(id, time.Minute)
}

// The agbot's own trouble while a new node is first deployed (the store
// down, or refusing the agbot every call) never refuses the deployment:
// the engine tries it again each cycle and the node is deployed within two
// intervals after the store is back.
func TestDeployThroughTheAgbotsOwnTroubleIsDeployedWhenItEnds(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind error
	}{
		{"store unavailable", edgesecrets.ErrUnavailable},
		{"agbot refused every call", edgesecrets.ErrPermission},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				agent := h.agent("node-1")
				h.put("org/db", canary+"v1")
				h.store.SetFaults(mock.Faults{Fail: tc.kind})
				h.start()
				defer h.stop()

				out, err := h.engine.Deploy(context.Background(), testDeployment(t, []string{"pw"}))
				require.NoError(t, err, "the agbot's own trouble refuses nothing")
				assert.False(t, out.Registered)
				assert.Empty(t, out.Waiting)
				assert.NotEmpty(t, out.Retrying)
				assert.Contains(t, h.logs.String(), `"level":"WARN","msg":"deployment not decided`)

				cycles(5)
				assert.False(t, h.registered("agr-1"), "nothing is registered while the store cannot say")
				assert.Empty(t, agent.messages())

				h.store.SetFaults(mock.Faults{})
				h.waitDeployed("agr-1", 2*testInterval)
				got, _ := agent.file("agr-1", "pw")
				assert.Equal(t, jsonFile(canary+"v1"), got)
				assert.Empty(t, h.cancelled())
				assert.Empty(t, h.readied(), "the engine deploys what it remembers itself")
			})
		})
	}
}

// A deployment held up only by a missing secret waits for it; the engine
// registers it once the secret exists, without the embedder's help.
func TestDeployWaitsForAMissingSecretAndRegistersItWhenItExists(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		agent := h.agent("node-1")
		h.start()
		defer h.stop()

		out, err := h.engine.Deploy(context.Background(), testDeployment(t, []string{"pw"}))
		require.NoError(t, err)
		assert.Equal(t, []string{"org/db"}, out.Waiting)
		assert.False(t, out.Registered)
		assert.Empty(t, out.Retrying)
		cycles(2)
		assert.False(t, h.registered("agr-1"))

		h.put("org/db", canary+"v1")
		h.waitDeployed("agr-1", 2*testInterval)
		got, _ := agent.file("agr-1", "pw")
		assert.Equal(t, jsonFile(canary+"v1"), got)
		assert.Empty(t, h.readied(), "OnReady is for waits the engine does not remember")
	})
}

// After a restart the engine no longer holds the deployment: the wait is
// in the state, and OnReady tells the embedder to deploy again.
func TestDeployWaitingAcrossARestartCallsOnReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.agent("node-1")
		h.start()
		defer h.stop()
		out, err := h.engine.Deploy(context.Background(), testDeployment(t, []string{"pw"}))
		require.NoError(t, err)
		require.Equal(t, []string{"org/db"}, out.Waiting)

		h.restart()
		h.put("org/db", canary+"v1")
		cycles(2)
		assert.Equal(t, []string{"agr-1"}, h.readied())
		assert.False(t, h.registered("agr-1"), "the embedder deploys it again")
	})
}

// Only a definite validation error refuses a deployment, with the whole
// report; nothing is registered or retried.
func TestDeployRefusesADefiniteValidationError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		agent := h.agent("node-1")
		h.start()
		defer h.stop()

		// org/db is missing too: not what refuses it, and not listed.
		out, err := h.engine.Deploy(context.Background(), testDeployment(t, []string{"pw", "pw2"}, "pw2"))
		require.Error(t, err)
		assert.ErrorIs(t, err, edgesecrets.ErrInvalid)
		var refused *delivery.RefusedError
		require.ErrorAs(t, err, &refused)
		require.NotNil(t, refused.Report)
		assert.Contains(t, err.Error(), string(binding.CodeSecretUnbound))
		assert.NotContains(t, err.Error(), string(binding.CodeVaultSecretMissing))
		assert.Equal(t, delivery.Deployed{}, out)

		cycles(3)
		assert.False(t, h.registered("agr-1"))
		assert.Empty(t, agent.messages())
	})
}

// A definite error refuses even when the store is down too: what the store
// would say cannot fix it.
func TestDeployRefusesADefiniteErrorDuringAnOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.store.SetFaults(mock.Faults{Fail: edgesecrets.ErrUnavailable})
		_, err := h.engine.Deploy(context.Background(), testDeployment(t, []string{"pw", "pw2"}, "pw2"))
		assert.ErrorIs(t, err, edgesecrets.ErrInvalid)
	})
}

func TestDeployNamesEveryInvalidField(t *testing.T) {
	h := newHarness(t)
	_, err := h.engine.Deploy(context.Background(), delivery.Deployment{Org: "a/b", NodeID: ".."})
	require.ErrorIs(t, err, edgesecrets.ErrInvalid)
	for _, want := range []string{"ID is empty", "node is empty", "organisation", "node id", "resolver is nil"} {
		assert.Contains(t, err.Error(), want)
	}
}

// An agreement of the deployment's id that exists with other services is
// not retried: Register cannot change it in place, so Deploy returns its
// ErrExists for the embedder to end and make it again.
func TestDeployOfAnAgreementWithOtherServicesIsErrExists(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.agent("node-1")
		h.put("org/db", canary+"v1")
		h.register("agr-1", "node-1", "org/db") // service org/svc without a container
		h.start()
		defer h.stop()
		_, err := h.engine.Deploy(context.Background(), testDeployment(t, []string{"pw"}))
		require.ErrorIs(t, err, state.ErrExists)
		cycles(2)
		assert.NotContains(t, h.logs.String(), "deployment registered after waiting", "not retried")
	})
}

// A deployment of an agreement whose cancellation its agent has not
// acknowledged yet is not dropped: the engine tries it again each cycle
// and makes the agreement again once the cancellation is done (the fault
// simulation's seed 251 of three agbots: a wait fired while the agent was
// unreachable, its deployment dropped as "exists", the node stranded).
func TestDeployOfAnAgreementBeingCancelledIsMadeAgainOnceItIsGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		agent := h.agent("node-1")
		h.put("org/db", canary+"v1")
		h.start()
		defer h.stop()
		out, err := h.engine.Deploy(context.Background(), testDeployment(t, []string{"pw"}))
		require.NoError(t, err)
		require.True(t, out.Registered)
		h.wait("agr-1", time.Minute)

		agent.setDown(true)
		require.NoError(t, h.engine.End(context.Background(), "agr-1"))
		out, err = h.engine.Deploy(context.Background(), testDeployment(t, []string{"pw"}))
		require.NoError(t, err, "not refused: the cancellation is under way")
		assert.False(t, out.Registered)
		assert.Contains(t, out.Retrying, "being cancelled")
		cycles(2)
		assert.Equal(t, state.PhaseCancelling, h.status("agr-1").Phase, "the agent has not acknowledged")

		agent.setDown(false)
		require.NoError(t, h.engine.Resync(context.Background(), "node-1"))
		madeAgain := func() bool {
			st, err := h.engine.Status(context.Background(), "agr-1")
			return err == nil && st.Phase == state.PhaseActive && st.InSync
		}
		deadline := time.Now().Add(3 * testInterval)
		for !madeAgain() {
			require.True(t, time.Now().Before(deadline), "made again within three intervals")
			time.Sleep(time.Second)
		}
		got, _ := agent.file("agr-1", "pw")
		assert.Equal(t, jsonFile(canary+"v1"), got)
	})
}

// A binding with enableNodeLevelSecrets whose candidates are all missing
// waits for each of them: whichever is written, the node's own or the
// organisation's it falls back to, deploys it (found by the fault
// simulation, seeds 23 of three agbots and 28 of two: the wait named only
// the candidate the check reported, and the node stayed undeployed when
// the other one was written).
func TestDeployWaitingForANodeLevelBindingGoesOnWithEitherCandidate(t *testing.T) {
	for _, written := range []string{"org/node/node-1/db", "org/db"} {
		t.Run(written, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				agent := h.agent("node-1")
				h.start()
				defer h.stop()
				d := testDeployment(t, []string{"pw"})
				policy, err := binding.DecodeDeploymentPolicy(strings.NewReader(`{
					"service": {"name": "svc", "org": "org", "arch": "amd64", "serviceVersions": [{"version": "1.0.0"}]},
					"secretBinding": [{"serviceOrgid": "org", "serviceUrl": "svc", "serviceArch": "amd64",
						"serviceVersionRange": "[1.0.0,INFINITY)", "enableNodeLevelSecrets": true, "secrets": [{"pw": "db"}]}]}`))
				require.NoError(t, err)
				d.Target = policy

				out, err := h.engine.Deploy(context.Background(), d)
				require.NoError(t, err)
				assert.Equal(t, []string{"org/db", "org/node/node-1/db"}, out.Waiting)
				cycles(2)
				assert.False(t, h.registered("agr-1"))

				h.put(written, canary+"v1")
				h.waitDeployed("agr-1", 2*testInterval)
				got, _ := agent.file("agr-1", "pw")
				assert.Equal(t, jsonFile(canary+"v1"), got)
			})
		})
	}
}
