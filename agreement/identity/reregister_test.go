package identity

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/testkit/logtest"
)

// The agent registers again on its own when the hub or an agbot no longer
// knows its identity. These tests run the real Agent against a real
// Issuer in synctest bubbles.

// lostWarning is the WARN line an agent logs once per lost identity.
const lostWarning = `"level":"WARN","msg":"identity: the identity is lost (no record, revoked or expired); registering again"`

// recordingStore is the hub's CertStore with the knobs the tests need: it
// records every nonce used, can fail the next Puts, forget a record, or
// start afresh as a new, empty store.
type recordingStore struct {
	mu       sync.Mutex
	inner    CertStore
	nonces   []string
	failPuts int
}

func newRecordingStore() *recordingStore { return &recordingStore{inner: NewMemoryCertStore()} }

func (s *recordingStore) store() CertStore {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inner
}

func (s *recordingStore) Get(ctx context.Context, provider, instanceID string) (Record, error) {
	return s.store().Get(ctx, provider, instanceID)
}

func (s *recordingStore) Put(ctx context.Context, rec Record) (Record, error) {
	s.mu.Lock()
	if s.failPuts > 0 {
		s.failPuts--
		s.mu.Unlock()
		return Record{}, errors.New("disk full")
	}
	s.mu.Unlock()
	return s.store().Put(ctx, rec)
}

func (s *recordingStore) UseNonce(ctx context.Context, u NonceUse) error {
	s.mu.Lock()
	s.nonces = append(s.nonces, hex.EncodeToString(u.Nonce))
	s.mu.Unlock()
	return s.store().UseNonce(ctx, u)
}

// forget deletes id's record, tombstone or not.
func (s *recordingStore) forget(id Identity) {
	m := s.store().(*memoryCertStore)
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.records, instanceKey{id.Provider, id.InstanceID})
}

// reset replaces the store by a new, empty one: every record and nonce is
// gone.
func (s *recordingStore) reset(Identity) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inner = NewMemoryCertStore()
}

func (s *recordingStore) failNextPuts(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failPuts = n
}

func (s *recordingStore) usedNonces() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.nonces...)
}

// keptAgent is an agent given AgentOptions.Attest, running Run in the
// test's bubble, with what the tests look at.
type keptAgent struct {
	*Agent
	store *recordingStore
	hub   *testHub
	logs  *logtest.Buffer
	done  chan error

	mu       sync.Mutex
	attested []time.Time // when each registration attempt asked for an attestation
}

// Backoff settings of keptAgent: with jitter 1/2 the delays after
// consecutive failures are 750 ms, 1.5 s, 3 s, then 6 s for ever.
const (
	testInitialBackoff = time.Second
	testMaxBackoff     = 8 * time.Second
)

// startKeptAgent starts Run of an agent that registers on its own with a
// hub issuing certificates of lifetime, and waits for its first
// registration.
func startKeptAgent(t *testing.T, lifetime time.Duration, withHub func(hub) hub) *keptAgent {
	t.Helper()
	store := newRecordingStore()
	h := newHub(t, func(o *IssuerOptions) { o.Store, o.MaxLifetime = store, lifetime })
	log, logs := logtest.NewLogger()
	k := newAgentKeys(t)
	ka := &keptAgent{store: store, hub: h, logs: logs, done: make(chan error, 1)}
	agent, err := NewAgent(AgentOptions{
		Instance: testID, SigningKey: k.sign, EncryptionKey: k.enc.PublicKey(), Issuer: h.Issuer,
		InitialBackoff: testInitialBackoff, MaxBackoff: testMaxBackoff, Jitter: halfJitter, Logger: log,
		Attest: func(context.Context) (Attestation, error) {
			ka.mu.Lock()
			ka.attested = append(ka.attested, now())
			ka.mu.Unlock()
			return "good", nil
		},
	})
	require.NoError(t, err)
	if withHub != nil {
		agent.hub = withHub(agent.hub)
	}
	ka.Agent = agent
	ctx, cancel := context.WithCancel(context.Background())
	go func() { ka.done <- agent.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		assert.ErrorIs(t, <-ka.done, context.Canceled, "Run ran until cancelled")
	})
	synctest.Wait()
	require.NotNil(t, agent.certificate(), "Run registers an agent without a certificate")
	require.Equal(t, []time.Time{t0}, ka.attempts())
	return ka
}

func (ka *keptAgent) attempts() []time.Time {
	ka.mu.Lock()
	defer ka.mu.Unlock()
	return append([]time.Time(nil), ka.attested...)
}

// verify is what an agbot does with the agent's published chain.
func (ka *keptAgent) verify() error {
	_, err := ka.hub.Verifier().Verify(context.Background(), ka.CertificateChain())
	return err
}

func (ka *keptAgent) warnings() int { return strings.Count(ka.logs.String(), lostWarning) }

// delays returns the time between consecutive times.
func delays(times []time.Time) []time.Duration {
	var d []time.Duration
	for i := 1; i < len(times); i++ {
		d = append(d, times[i].Sub(times[i-1]))
	}
	return d
}

// An agbot whose records lost the agent (the record deleted, or a fresh
// store) refuses its certificate; told so, the agent registers again at
// once, and again after each backoff while the hub fails, each time with
// a fresh nonce, and warns once.
func TestAgentRegistersAgainWhenAnAgbotLostIt(t *testing.T) {
	for name, lose := range map[string]func(*recordingStore, Identity){
		"record deleted": (*recordingStore).forget,
		"fresh store":    (*recordingStore).reset,
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ka := startKeptAgent(t, 3*time.Hour, nil)
				require.NoError(t, ka.verify())

				time.Sleep(time.Minute)
				lose(ka.store, testID)
				ka.store.failNextPuts(2) // the hub's store fails the first two registrations
				refusal := ka.verify()
				require.ErrorIs(t, refusal, ErrUnknownInstance)
				require.ErrorIs(t, refusal, ErrIdentityLost)
				require.ErrorIs(t, refusal, edgesecrets.ErrNotFound)
				told := now()
				assert.True(t, ka.Refused(refusal))
				assert.True(t, ka.Refused(fmt.Errorf("the relay: %w", refusal)), "a second report while one is pending")

				time.Sleep(time.Hour)
				require.NoError(t, ka.verify(), "the agent is known again")
				attempts := ka.attempts()
				require.Len(t, attempts, 4, "one registration, three attempts to register again")
				assert.Equal(t, told, attempts[1], "the first attempt comes at once")
				assert.Equal(t, []time.Duration{750 * time.Millisecond, 1500 * time.Millisecond}, delays(attempts[1:]))
				nonces := ka.store.usedNonces()
				assert.Len(t, nonces, 4, "each attempt spent a nonce")
				seen := map[string]bool{}
				for _, n := range nonces {
					assert.False(t, seen[n], "nonce %s used twice", n)
					seen[n] = true
				}
				assert.Equal(t, 1, ka.warnings(), "one WARN for the episode, not one per attempt:\n%s", ka.logs)
			})
		})
	}
}

// hubSwitch lets a test take the hub down for renewals.
type hubSwitch struct {
	hub
	down atomic.Bool
}

func (s *hubSwitch) refresh(ctx context.Context, id Identity, req *refreshBody) (*responseBody, error) {
	if s.down.Load() {
		return nil, newError(opRefresh, id, edgesecrets.ErrUnavailable, "hub down", nil)
	}
	return s.hub.refresh(ctx, id, req)
}

// A renewal answered "no record" or "certificate expired" makes the agent
// register again, without being told: at once when the renewal answers.
func TestAgentRegistersAgainWhenRenewalSaysLost(t *testing.T) {
	t.Run("unknown", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ka := startKeptAgent(t, 3*time.Hour, nil)
			due := renewalTime(ka.certificate())
			time.Sleep(time.Hour)
			ka.store.forget(testID)
			time.Sleep(2 * time.Hour)
			assert.Equal(t, []time.Time{t0, due}, ka.attempts(), "registered again when the renewal was answered")
			require.NoError(t, ka.verify())
			assert.Equal(t, 1, ka.warnings())
		})
	})
	t.Run("expired", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var sw *hubSwitch
			ka := startKeptAgent(t, 3*time.Hour, func(h hub) hub { sw = &hubSwitch{hub: h}; return sw })
			sw.down.Store(true) // renewals fail from 2 h on, past expiry at 3 h
			time.Sleep(3*time.Hour + time.Minute)
			require.ErrorIs(t, ka.verify(), ErrExpired)
			require.Len(t, ka.attempts(), 1, "no registration while the hub is down")
			sw.down.Store(false)
			time.Sleep(testMaxBackoff) // the next renewal attempt is answered "expired"
			require.Len(t, ka.attempts(), 2)
			require.NoError(t, ka.verify())
			assert.Equal(t, 1, ka.warnings())
		})
	})
}

// A revoked instance cannot register until its tombstone is removed: the
// agent keeps trying, with capped backoff, without end, and warns once;
// once the record is removed it is registered at the next attempt.
func TestAgentKeepsRegisteringWhileRevoked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ka := startKeptAgent(t, 3*time.Hour, nil)
		time.Sleep(time.Minute)
		require.NoError(t, ka.hub.Revoke(context.Background(), testID))
		refusal := ka.verify()
		require.ErrorIs(t, refusal, ErrRevoked)
		require.ErrorIs(t, refusal, ErrForbidden)
		require.True(t, ka.Refused(refusal))

		time.Sleep(time.Hour)
		attempts := ka.attempts()
		require.Greater(t, len(attempts), 500, "never exhausted")
		assert.Equal(t, []time.Duration{750 * time.Millisecond, 1500 * time.Millisecond, 3 * time.Second, 6 * time.Second, 6 * time.Second},
			delays(attempts[1:7]), "capped at MaxBackoff")
		assert.ErrorIs(t, ka.verify(), ErrRevoked)

		ka.store.forget(testID) // the administrator removes the tombstone
		last := attempts[len(attempts)-1]
		time.Sleep(time.Until(last.Add(6 * time.Second)))
		synctest.Wait()
		require.NoError(t, ka.verify())
		assert.Equal(t, 1, ka.warnings(), "one WARN for the episode")
		nonces := ka.store.usedNonces()
		assert.Len(t, nonces, len(ka.attempts()), "a fresh nonce for each attempt")
	})
}

// Refusals that a new registration does not fix change nothing.
func TestAgentRefusedIgnoresOtherErrors(t *testing.T) {
	for name, err := range map[string]error{
		"nil":                     nil,
		"store unavailable":       newError(opVerify, testID, edgesecrets.ErrUnavailable, "record store failed", errors.New("timeout")),
		"serial not current":      newError(opVerify, testID, ErrForbidden, "certificate serial 2a is neither the current nor the previous serial of the instance", nil),
		"not from the hub CA":     newError(opVerify, Identity{}, ErrUnauthenticated, "certificate does not chain to the hub CA", nil),
		"not found without cause": newError(opDecode, Identity{}, edgesecrets.ErrNotFound, "no such resource", nil),
		"context":                 context.DeadlineExceeded,
		"other":                   errors.New("relay: status 500"),
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ka := startKeptAgent(t, 3*time.Hour, nil)
				assert.False(t, ka.Refused(err))
				time.Sleep(time.Hour) // before the renewal at 2 h
				assert.Len(t, ka.attempts(), 1, "no registration")
				assert.Len(t, ka.store.usedNonces(), 1)
				assert.Zero(t, ka.warnings())
			})
		})
	}
}

// An agbot that refuses a new certificate as soon as it is registered
// does not drive the agent into a loop: losses soon after a registration
// are spaced by the growing backoff and are one episode (one WARN); once
// the identity held for MaxBackoff, the next loss is acted on at once
// again.
func TestAgentRegistersAgainWithBackoffWhenLostRepeatedly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ka := startKeptAgent(t, 3*time.Hour, nil)
		lost := newError(opVerify, testID, edgesecrets.ErrNotFound, "no record for the instance", ErrUnknownInstance)
		time.Sleep(testMaxBackoff)
		start := now()
		for i := range 4 {
			ka.Refused(lost)
			for len(ka.attempts()) < i+2 {
				time.Sleep(time.Millisecond)
			}
			time.Sleep(time.Millisecond) // the agbot refuses the new certificate 1 ms later
		}
		attempts := ka.attempts()[1:]
		require.Len(t, attempts, 4)
		assert.Equal(t, start, attempts[0], "the first loss: at once")
		assert.Equal(t, []time.Duration{750 * time.Millisecond, 1500 * time.Millisecond, 3 * time.Second}, delays(attempts),
			"each loss soon after a registration waits for the backoff")
		assert.Equal(t, 1, ka.warnings(), "one WARN for the episode")

		time.Sleep(testMaxBackoff)
		told := now()
		ka.Refused(lost)
		synctest.Wait()
		assert.Equal(t, told, ka.attempts()[5], "the identity held: at once again")
		assert.Equal(t, 2, ka.warnings(), "a new episode")
	})
}

// Without Attest, Run returns a loss, from a renewal or a report, for the
// caller to register.
func TestAgentRunWithoutAttestReturnsLoss(t *testing.T) {
	t.Run("reported", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHub(t)
			agent := newTestAgent(t, h.Issuer, newAgentKeys(t), nil)
			_, err := agent.Register(context.Background(), "good")
			require.NoError(t, err)
			done := make(chan error, 1)
			go func() { done <- agent.Run(context.Background()) }()
			synctest.Wait()
			assert.True(t, agent.Refused(newError(opVerify, testID, ErrUnauthenticated, "certificate expired", ErrExpired)))
			assert.ErrorIs(t, <-done, ErrExpired)
		})
	})
	t.Run("renewal", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			store := newRecordingStore()
			h := newHub(t, func(o *IssuerOptions) { o.Store, o.MaxLifetime = store, 3*time.Hour })
			agent := newTestAgent(t, h.Issuer, newAgentKeys(t), nil)
			cert, err := agent.Register(context.Background(), "good")
			require.NoError(t, err)
			store.forget(testID)
			err = agent.Run(context.Background())
			assert.ErrorIs(t, err, ErrUnknownInstance, "returned, not retried")
			assert.Equal(t, renewalTime(cert), now())
		})
	})
}

// Over HTTP the client tells "no record for the instance" (reason
// "unknown") apart from a 404 for a wrong path.
func TestClientTellsUnknownInstanceFromWrongPath(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newRecordingStore()
		h := newHub(t, func(o *IssuerOptions) { o.Store = store })
		client := inMemoryClient(t, h.Issuer)
		agent := newTestAgent(t, client, newAgentKeys(t), nil)
		_, err := agent.Register(context.Background(), "good")
		require.NoError(t, err)
		store.forget(testID)
		_, err = agent.Renew(context.Background())
		require.ErrorIs(t, err, ErrUnknownInstance)
		require.ErrorIs(t, err, ErrIdentityLost)
		require.ErrorIs(t, err, edgesecrets.ErrNotFound)
		assert.True(t, agent.Refused(err))

		wrong, err := NewClient(ClientOptions{BaseURL: "http://hub.test/wrong", HTTPClient: &http.Client{Transport: handlerTransport{h.Handler(nil)}}})
		require.NoError(t, err)
		agent.hub = wrong
		_, err = agent.Register(context.Background(), "good")
		require.ErrorIs(t, err, edgesecrets.ErrNotFound)
		assert.NotErrorIs(t, err, ErrIdentityLost)
	})
}
