package delivery_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// verifier is delivery.Agents over the fleet that refuses nodes with the
// error set for them, as an identity verifier refuses an agent it has no
// record of.
type verifier struct {
	*fleet
	mu     sync.Mutex
	refuse map[string]error
}

func (v *verifier) set(node string, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.refuse[node] = err
}

func (v *verifier) Keys(ctx context.Context, node string) (*agreement.PublicKeys, error) {
	v.mu.Lock()
	err := v.refuse[node]
	v.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return v.fleet.Keys(ctx, node)
}

// logRecord is one JSON log line of the harness's logger.
type logRecord struct {
	Level     string `json:"level"`
	Msg       string `json:"msg"`
	Agreement string `json:"agreement"`
	Reason    string `json:"reason"`
	Why       string `json:"why"`
}

// reasonLines returns the log lines of level that report reason for agreement.
func (h *harness) reasonLines(level, agreementID string, code delivery.ReasonCode) []logRecord {
	h.t.Helper()
	var out []logRecord
	for line := range strings.SplitSeq(strings.TrimSpace(h.logs.String()), "\n") {
		var r logRecord
		require.NoError(h.t, json.Unmarshal([]byte(line), &r), line)
		if r.Level == level && r.Agreement == agreementID && r.Reason == string(code) {
			out = append(out, r)
		}
	}
	return out
}

// An agreement whose agent the engine cannot verify says so in its status
// and in Health, with the verifier's error, and is logged at WARN once per
// cause: again when the cause changes and after it cleared, never at each
// retry.
func TestUnverifiedAgentIsAReason(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := &verifier{refuse: map[string]error{}}
		h := newHarness(t, func(o *delivery.Options) { o.Agents = v })
		v.fleet = h.fleet
		agent := h.agent("node-1")
		v.set("node-1", errors.New("certificate refused: no record for the instance"))
		h.put("org/db", canary+"v1")
		h.register("agr-1", "node-1", "org/db")
		h.start()
		defer h.stop()

		time.Sleep(10 * testMaxDelay) // many retries
		synctest.Wait()
		st := h.status("agr-1")
		require.NotNil(t, st.Reason, "status: %+v", st)
		assert.Equal(t, delivery.ReasonAgentUnverified, st.Reason.Code)
		assert.Contains(t, st.Reason.Message, "no record for the instance")
		assert.Contains(t, st.Reason.Message, `node "node-1"`)
		assert.Contains(t, st.Waiting, "no record for the instance", "not a silent wait")
		assert.Greater(t, st.Attempts, 5, "retried meanwhile")
		assert.Equal(t, []delivery.ReasonCount{{Code: delivery.ReasonAgentUnverified, Agreements: 1, Example: "agr-1", Message: st.Reason.Message}},
			h.engine.Health(context.Background()).Reasons)
		warns := h.reasonLines("WARN", "agr-1", delivery.ReasonAgentUnverified)
		require.Len(t, warns, 1, "one WARN line for the cause, not one per retry")
		assert.Contains(t, warns[0].Why, "no record for the instance")

		// Another cause: logged again, once.
		v.set("node-1", errors.New("certificate revoked"))
		time.Sleep(5 * testMaxDelay)
		synctest.Wait()
		assert.Len(t, h.reasonLines("WARN", "agr-1", delivery.ReasonAgentUnverified), 2)
		assert.Contains(t, h.status("agr-1").Reason.Message, "certificate revoked")

		// Verified: delivered, the reason clears.
		v.set("node-1", nil)
		st = h.wait("agr-1", testMaxDelay+time.Second)
		assert.Nil(t, st.Reason)
		assert.Empty(t, st.Waiting)
		assert.Nil(t, h.engine.Health(context.Background()).Reasons)
		got, _ := agent.file("agr-1", "pw")
		assert.Equal(t, jsonFile(canary+"v1"), got)

		// The same cause after it cleared is logged again.
		v.set("node-1", errors.New("certificate revoked"))
		h.put("org/db", canary+"v2")
		cycles(2)
		assert.Equal(t, delivery.ReasonAgentUnverified, h.status("agr-1").Reason.Code)
		assert.Len(t, h.reasonLines("WARN", "agr-1", delivery.ReasonAgentUnverified), 3)

		// A dropped agreement leaves Health at the next cycle.
		require.NoError(t, h.engine.Drop(context.Background(), "agr-1"))
		cycles(1)
		assert.Nil(t, h.engine.Health(context.Background()).Reasons)
	})
}

// formatAgreement is agr-1 on node-1 with secret "api_key" bound to
// org/key in format.
func formatAgreement(format string) delivery.Agreement {
	return delivery.Agreement{ID: "agr-1", Node: "node-1", Services: []binding.ServiceBinding{{
		Service: agreement.ServiceRef{Org: "org", URL: "svc", Version: "1.0.0"},
		Secrets: map[string]binding.BoundSecret{"api_key": {StoreNames: []string{"org/key"}, Format: format}},
	}}}
}

// A secret that cannot be rendered in its declared format holds the
// agreement back with ReasonFormatUnrenderable, shown in the status and
// Health and logged at WARN within one interval, once; rewritten the Open
// Horizon way (a key and a value), it is delivered as its value.
func TestUnrenderableFormatIsAReason(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		agent := h.agent("node-1")
		_, err := h.store.Inner.Put(context.Background(), &secretstore.Secret{Name: "org/key",
			Data: edgesecrets.Data{"user": []byte(canary + "u"), "password": []byte(canary + "p")}}, secretstore.PutOptions{})
		require.NoError(t, err)
		require.NoError(t, h.engine.Register(context.Background(), formatAgreement(agreement.FormatRaw)))
		h.start()
		defer h.stop()

		time.Sleep(testInterval - time.Second)
		synctest.Wait()
		st := h.status("agr-1")
		require.NotNil(t, st.Reason, "within one interval: %+v", st)
		assert.Equal(t, delivery.ReasonFormatUnrenderable, st.Reason.Code)
		for _, part := range []string{`secret "api_key"`, `store secret "org/key"`, `format "raw" needs exactly one key`, "has 2 keys"} {
			assert.Contains(t, st.Reason.Message, part)
		}
		assert.NotNil(t, h.engine.Health(context.Background()).Reasons)
		require.Len(t, h.reasonLines("WARN", "agr-1", delivery.ReasonFormatUnrenderable), 1)
		_, held := agent.file("agr-1", "api_key")
		assert.False(t, held, "nothing is sent")

		time.Sleep(10 * testMaxDelay)
		synctest.Wait()
		assert.Len(t, h.reasonLines("WARN", "agr-1", delivery.ReasonFormatUnrenderable), 1, "once per cause")
		assert.Empty(t, agent.messages(), "never sent")

		// Written as hzn writes it: delivered in raw as the value.
		_, err = h.store.Inner.Put(context.Background(), &secretstore.Secret{Name: "org/key",
			Data: edgesecrets.Data{"key": []byte("api"), "value": []byte(canary + "v")}}, secretstore.PutOptions{})
		require.NoError(t, err)
		st = h.wait("agr-1", testInterval+testMaxDelay)
		assert.Nil(t, st.Reason)
		got, _ := agent.file("agr-1", "api_key")
		assert.Equal(t, canary+"v", got)
		assert.Nil(t, h.engine.Health(context.Background()).Reasons)
	})
}

// Of an agreement in sync, a secret rotated to content its format cannot
// render waits with the reason while the agreement's other secrets are
// still updated.
func TestUnrenderableRotationHoldsBackOnlyThatSecret(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		agent := h.agent("node-1")
		h.put("org/db", canary+"v1")
		_, err := h.store.Inner.Put(context.Background(), &secretstore.Secret{Name: "org/key",
			Data: edgesecrets.Data{"key": []byte("api"), "value": []byte(canary + "k1")}}, secretstore.PutOptions{})
		require.NoError(t, err)
		a := formatAgreement(agreement.FormatValueOnly)
		a.Services[0].Secrets["pw"] = binding.BoundSecret{StoreNames: []string{"org/db"}}
		require.NoError(t, h.engine.Register(context.Background(), a))
		h.start()
		defer h.stop()
		h.wait("agr-1", time.Minute)

		_, err = h.store.Inner.Put(context.Background(), &secretstore.Secret{Name: "org/key",
			Data: edgesecrets.Data{"password": []byte(canary + "k2")}}, secretstore.PutOptions{})
		require.NoError(t, err)
		h.put("org/db", canary+"v2")
		cycles(2)

		st := h.status("agr-1")
		require.NotNil(t, st.Reason)
		assert.Equal(t, delivery.ReasonFormatUnrenderable, st.Reason.Code)
		assert.Contains(t, st.Reason.Message, `format "value_only" needs a "value" key`)
		got, _ := agent.file("agr-1", "pw")
		assert.Equal(t, jsonFile(canary+"v2"), got, "the other secret is updated")
		got, _ = agent.file("agr-1", "api_key")
		assert.Equal(t, canary+"k1", got, "the agent keeps the last value it could be sent")
		assert.Len(t, h.reasonLines("WARN", "agr-1", delivery.ReasonFormatUnrenderable), 1)
	})
}

// An agent that lost its files but kept its keys rejects the next update
// as of an unknown agreement (agreement.Reply.Unknown); the engine
// proposes the agreement again rather than repeating the update forever
// (the fault simulation's seed 7), and the agent holds the secret again.
func TestAnAgentThatLostTheAgreementIsProposedToAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		agent := h.deployOne()
		defer h.stop()
		agent.wipe(t)
		h.put("org/db", canary+"v2")
		deadline := time.Now().Add(3 * testInterval)
		for {
			if got, ok := agent.file("agr-1", "pw"); ok && got == jsonFile(canary+"v2") {
				break
			}
			require.True(t, time.Now().Before(deadline), "the agent holds the new content again within three intervals: %+v", h.status("agr-1"))
			time.Sleep(time.Second)
		}
		st := h.wait("agr-1", time.Minute)
		assert.Empty(t, st.Rejection)
		var proposals int
		for _, m := range agent.messages() {
			if m.Type == agreement.TypeProposal {
				proposals++
			}
		}
		assert.Equal(t, 2, proposals, "proposed again")
		assert.Contains(t, h.logs.String(), "the agent holds nothing of the agreement; proposing it again")
	})
}

// An agent that lost its files but kept its keys, and says so when it
// comes back (relay.Publication.HoldsNothing), is proposed its agreement
// again at once: no rotation may ever come to send it its secrets (the
// fault simulation's seed 7 with overlapping bindings). Saying it again
// before the agent answered sends no second proposal.
func TestAnAgentSayingItHoldsNothingIsProposedToAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		agent := h.deployOne()
		defer h.stop()
		proposals := func() int {
			n := 0
			for _, m := range agent.messages() {
				if m.Type == agreement.TypeProposal {
					n++
				}
			}
			return n
		}
		require.Equal(t, 1, proposals())
		cycles(3)
		require.Equal(t, 1, proposals(), "in sync, nothing is sent")

		agent.wipe(t)
		_, ok := agent.file("agr-1", "pw")
		require.False(t, ok)
		agent.setLoseReplies(true)
		require.NoError(t, h.engine.ProposeAgain(t.Context(), "agr-1"))
		time.Sleep(100 * time.Millisecond) // the send failing, the next is a second away
		synctest.Wait()
		require.Equal(t, 2, proposals(), "proposed again at once")
		for range 3 {
			require.NoError(t, h.engine.ProposeAgain(t.Context(), "agr-1"))
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		assert.Equal(t, 2, proposals(), "saying it again while the proposal is unanswered sends no other")

		agent.setLoseReplies(false)
		st := h.wait("agr-1", 3*testInterval)
		assert.Empty(t, st.Rejection)
		got, ok := agent.file("agr-1", "pw")
		assert.True(t, ok, "the agent holds its secret again")
		assert.Equal(t, jsonFile(canary+"v1"), got)
		assert.Contains(t, h.logs.String(), "the agent holds nothing of the agreement; proposing it again")

		require.NoError(t, h.engine.ProposeAgain(t.Context(), "agr-unknown"), "an unknown agreement is left as it is")
		assert.ErrorIs(t, h.engine.ProposeAgain(t.Context(), ""), edgesecrets.ErrInvalid)
	})
}

// An agent's rejection is reported with the code its reason starts with:
// a template on the node that could not render the secret (agentapi's
// reply to ErrTemplateFailed) is TemplateFailed, any other refusal
// AgentRejected; the operator lists the agreements by either.
func TestRejectionReasonCodes(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want delivery.ReasonCode
	}{
		{"another refusal", fmt.Errorf("%w: updates are disabled on this node", edgesecrets.ErrInvalid), delivery.ReasonAgentRejected},
		{"a template failed", fmt.Errorf("%w: instance web, secret api_key: template api_key:1:2", agentapi.ErrTemplateFailed), delivery.ReasonTemplateFailed},
		{"the code inside another reason", fmt.Errorf("%w: not a TemplateFailed: prefix", edgesecrets.ErrInvalid), delivery.ReasonAgentRejected},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				agent := h.deployOne()
				defer h.stop()

				agent.setRejectUpdatesWith(c.err)
				h.put("org/db", canary+"v2")
				time.Sleep(time.Minute)
				synctest.Wait()
				st := h.status("agr-1")
				require.NotNil(t, st.Reason)
				assert.Equal(t, c.want, st.Reason.Code, st.Reason.Message)
				assert.Equal(t, st.Rejection, st.Reason.Message)
				page := h.engine.Agreements(context.Background(), delivery.ListOptions{Reason: c.want})
				require.Len(t, page.Agreements, 1)
				assert.Equal(t, "agr-1", page.Agreements[0].ID)
			})
		})
	}
}
