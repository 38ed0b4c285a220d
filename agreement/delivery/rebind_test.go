package delivery_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/boltstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/binding"
)

// fileLog is a Transport that records, after every message the agent
// handled, what the agent's file of one service secret holds: every value
// the file takes, since only a message changes it.
type fileLog struct {
	delivery.Transport
	agreementID, name string

	mu     sync.Mutex
	agent  *testAgent
	values []string // "" when the agent held no file
}

// logFiles makes the harness's transport record the files of the
// agreement's service secret name.
func logFiles(l *fileLog) func(*delivery.Options) {
	return func(o *delivery.Options) {
		l.Transport = o.Transport
		o.Transport = l
	}
}

func (l *fileLog) Send(ctx context.Context, m delivery.Message) ([]byte, error) {
	reply, err := l.Transport.Send(ctx, m)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.agent != nil && m.AgreementID == l.agreementID {
		v, _ := l.agent.file(l.agreementID, l.name)
		l.values = append(l.values, v)
	}
	return reply, err
}

func (l *fileLog) watch(a *testAgent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.agent = a
}

func (l *fileLog) taken() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.values...)
}

// deployWatched is deployOne with the agent's files logged from the
// start.
func (h *harness) deployWatched(log *fileLog) *testAgent {
	h.t.Helper()
	agent := h.agent("node-1")
	log.watch(agent)
	h.put("org/db", canary+"v1")
	h.register("agr-1", "node-1", "org/db")
	h.start()
	h.wait("agr-1", time.Minute)
	return agent
}

// inStates runs test once with the memory state and once with the
// embedded file; state, called in test's bubble, gives the harness option
// that selects it.
func inStates(t *testing.T, test func(t *testing.T, state func(*testing.T) func(*delivery.Options))) {
	t.Run("memory", func(t *testing.T) {
		test(t, func(*testing.T) func(*delivery.Options) { return func(*delivery.Options) {} })
	})
	t.Run("boltstate", func(t *testing.T) {
		test(t, func(t *testing.T) func(*delivery.Options) {
			return func(o *delivery.Options) {
				st, _, err := boltstate.Open(filepath.Join(t.TempDir(), "agbot.db"), boltstate.Options{})
				require.NoError(t, err)
				t.Cleanup(func() { _ = st.Close() })
				o.State = st
			}
		})
	})
}

func TestRebindDeliversTheNewStoreSecretInPlace(t *testing.T) {
	inStates(t, testRebindInPlace)
}

func testRebindInPlace(t *testing.T, state func(*testing.T) func(*delivery.Options)) {
	synctest.Test(t, func(t *testing.T) {
		log := &fileLog{agreementID: "agr-1", name: "pw"}
		h := newHarness(t, state(t), logFiles(log))
		h.state = h.opts.State
		agent := h.deployWatched(log)
		defer h.stop()
		h.put("org/db-new", canary+"new")

		h.register("agr-1", "node-1", "node/node-1/db", "org/db-new")
		st := h.wait("agr-1", 2*testInterval)
		got, _ := agent.file("agr-1", "pw")
		assert.Equal(t, jsonFile(canary+"new"), got, "the agent holds the new store secret's content within two intervals")
		assert.Equal(t, "org/db-new", st.Slots[0].Acked.StoreName, "acknowledged from the new binding's first existing candidate")

		assert.Equal(t, []string{jsonFile(canary + "v1"), jsonFile(canary + "new")}, log.taken(),
			"the file went from the old content to the new one and never held nothing")
		msgs := agent.messages()
		require.Len(t, msgs, 2)
		assert.Equal(t, agreement.TypeProposal, msgs[0].Type)
		assert.Equal(t, agreement.TypeUpdate, msgs[1].Type, "the change is a content update of the same agreement, not a new proposal")
		assert.Equal(t, []string{"svc:pw"}, agent.lastCarried())

		names, err := h.state.Names(context.Background(), "")
		require.NoError(t, err)
		assert.Equal(t, []string{"node/node-1/db", "org/db-new"}, names, "the old store name is no longer bound")
		h.put("org/db", canary+"v2")
		cycles(2)
		assert.Len(t, agent.messages(), 2, "a rotation of the store secret no longer bound sends nothing")

		h.put("org/db-new", canary+"new2")
		cycles(1)
		h.wait("agr-1", time.Minute)
		got, _ = agent.file("agr-1", "pw")
		assert.Equal(t, jsonFile(canary+"new2"), got, "a rotation of the new store secret is delivered")
		assert.Empty(t, h.cancelled(), "a rebind never cancels")
	})
}

func TestRebindToASecretNotYetWrittenKeepsTheOldContent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &fileLog{agreementID: "agr-1", name: "pw"}
		h := newHarness(t, logFiles(log))
		agent := h.deployWatched(log)
		defer h.stop()

		h.register("agr-1", "node-1", "org/later")
		cycles(2)
		st := h.status("agr-1")
		assert.False(t, st.InSync, "not in sync while the new store secret is missing")
		assert.Contains(t, st.LastError, `"org/later"`, "the status names the missing store secret")
		got, _ := agent.file("agr-1", "pw")
		assert.Equal(t, jsonFile(canary+"v1"), got, "the agent keeps the old content meanwhile")

		h.put("org/later", canary+"later")
		cycles(1)
		h.wait("agr-1", 2*testInterval)
		got, _ = agent.file("agr-1", "pw")
		assert.Equal(t, jsonFile(canary+"later"), got)
		assert.Equal(t, []string{jsonFile(canary + "v1"), jsonFile(canary + "later")}, log.taken(), "the file never held nothing")
		assert.Empty(t, h.cancelled())
	})
}

func TestRebindWhileTheAgentIsDownIsDeliveredWhenItIsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		agent := h.deployOne()
		defer h.stop()
		h.put("org/db-new", canary+"new")

		agent.setDown(true)
		h.register("agr-1", "node-1", "org/db-new")
		cycles(2)
		assert.False(t, h.status("agr-1").InSync)
		h.register("agr-1", "node-1", "org/db-new") // the same again while pending: nothing
		agent.setDown(false)
		require.NoError(t, h.engine.Resync(context.Background(), "node-1"))
		h.wait("agr-1", 2*testInterval)
		got, _ := agent.file("agr-1", "pw")
		assert.Equal(t, jsonFile(canary+"new"), got)
	})
}

func TestRegisterAgainRefusesMoreThanAStoreNameChangeNamingIt(t *testing.T) {
	svc := agreement.ServiceRef{Org: "org", URL: "svc", Version: "1.0.0"}
	base := func() delivery.Agreement { return testAgreement("agr-1", "node-1", "org/a") }
	cases := []struct {
		name   string
		change func(*delivery.Agreement)
		want   string
	}{
		{"another node", func(a *delivery.Agreement) { a.Node = "node-2" }, `it is on node "node-1", not "node-2"`},
		{"another service version", func(a *delivery.Agreement) { a.Services[0].Service.Version = "2.0.0" },
			"its services are org/svc@1.0.0, not org/svc@2.0.0"},
		{"one more service", func(a *delivery.Agreement) {
			a.Services = append(a.Services, binding.ServiceBinding{Service: agreement.ServiceRef{Org: "org", URL: "other"},
				Secrets: map[string]binding.BoundSecret{"pw": {StoreNames: []string{"org/a"}}}})
		}, "its services are"},
		{"another secret name", func(a *delivery.Agreement) {
			a.Services[0].Secrets = map[string]binding.BoundSecret{"token": {StoreNames: []string{"org/a"}}}
		}, `binds secrets "pw", not "token"`},
		{"one more secret", func(a *delivery.Agreement) {
			a.Services[0].Secrets["token"] = binding.BoundSecret{StoreNames: []string{"org/t"}}
		}, `binds secrets "pw", not "pw", "token"`},
		{"another format", func(a *delivery.Agreement) {
			a.Services[0].Secrets = map[string]binding.BoundSecret{"pw": {StoreNames: []string{"org/b"}, Format: "raw"}}
		}, `secret "pw" of service ` + svc.String() + ` has format "", not "raw"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				ctx := context.Background()
				require.NoError(t, h.engine.Register(ctx, base()))
				before, err := h.state.Get(ctx, "agr-1")
				require.NoError(t, err)

				a := base()
				c.change(&a)
				err = h.engine.Register(ctx, a)
				require.ErrorIs(t, err, state.ErrExists)
				assert.ErrorContains(t, err, c.want, "the error names what differs")
				assert.ErrorContains(t, err, "only the store names of its secrets can change in place")

				after, err := h.state.Get(ctx, "agr-1")
				require.NoError(t, err)
				assert.Equal(t, before, after, "a refused registration changes nothing")
			})
		})
	}
}

func TestRegisterAgainWithTheSameBindingsWritesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		ctx := context.Background()
		h.register("agr-1", "node-1", "node/node-1/a", "org/a")
		before, err := h.state.Get(ctx, "agr-1")
		require.NoError(t, err)
		h.register("agr-1", "node-1", "node/node-1/a", "org/a")
		after, err := h.state.Get(ctx, "agr-1")
		require.NoError(t, err)
		assert.Equal(t, before, after, "the same bindings again: not even the Revision changes")

		h.register("agr-1", "node-1", "org/a", "node/node-1/a")
		after, err = h.state.Get(ctx, "agr-1")
		require.NoError(t, err)
		assert.Equal(t, []string{"org/a", "node/node-1/a"}, after.Services[0].Secrets["pw"].StoreNames,
			"another order of the candidates is a change of binding")
	})
}

func TestRegisterAgainOfACancellingAgreementIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		agent := h.deployOne()
		defer h.stop()
		agent.setDown(true)
		require.NoError(t, h.engine.End(context.Background(), "agr-1"))
		err := h.engine.Register(context.Background(), testAgreement("agr-1", "node-1", "org/other"))
		require.ErrorIs(t, err, state.ErrExists)
		assert.ErrorContains(t, err, "being cancelled")
		agent.setDown(false)
	})
}

func TestRebindSupersedesARotationInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, func(o *delivery.Options) { o.ReplyTimeout = time.Hour })
		agent := h.agent("node-1")
		agent.async = true
		h.put("org/db", canary+"v1")
		h.put("org/db-new", canary+"new")
		h.register("agr-1", "node-1", "org/db")
		h.start()
		defer h.stop()
		ctx := context.Background()
		synctest.Wait()
		proposal := agent.takeReplies()
		require.Len(t, proposal, 1)
		require.NoError(t, h.engine.HandleReply(ctx, "node-1", proposal[0]))

		h.put("org/db", canary+"v2")
		cycles(1) // the rotation's update is in flight, unanswered
		h.register("agr-1", "node-1", "org/db-new")
		synctest.Wait()
		replies := agent.takeReplies()
		require.Len(t, replies, 2, "the rebind is sent without waiting for the rotation's answer")
		require.NoError(t, h.engine.HandleReply(ctx, "node-1", replies[0]), "the rotation's late answer is no error")
		assert.False(t, h.status("agr-1").InSync, "the rotation's answer does not settle the rebind")
		require.NoError(t, h.engine.HandleReply(ctx, "node-1", replies[1]))
		st := h.status("agr-1")
		assert.True(t, st.InSync)
		assert.Equal(t, "org/db-new", st.Slots[0].Acked.StoreName)
		got, _ := agent.file("agr-1", "pw")
		assert.Equal(t, jsonFile(canary+"new"), got)
	})
}

// An agreement made again with the id of one that ended (a deployment
// whose services changed, a secret deleted and written again) is
// proposed with sequences above every message of the one before: its
// agent, which keeps the id's replay floor, accepts the first proposal.
func TestAnAgreementMadeAgainAfterItEndedIsAcceptedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		agent := h.deployOne()
		defer h.stop()
		ctx := context.Background()
		h.put("org/db", canary+"v2")
		cycles(1)
		h.wait("agr-1", time.Minute)
		require.NoError(t, h.engine.End(ctx, "agr-1"))
		_, err := h.engine.Wait(ctx, "agr-1")
		require.ErrorIs(t, err, state.ErrNotFound, "ended once the agent acknowledged")
		ended := agent.messages()

		h.register("agr-1", "node-1", "org/db")
		synctest.Wait()
		msgs := agent.messages()
		require.Len(t, msgs, len(ended)+1, "the new proposal was opened at its first sending")
		assert.Greater(t, msgs[len(msgs)-1].Sequence, ended[len(ended)-1].Sequence)
		assert.True(t, h.status("agr-1").InSync)
		agent.mu.Lock()
		assert.Zero(t, agent.dropped, "no envelope was refused as a replay")
		agent.mu.Unlock()
	})
}
