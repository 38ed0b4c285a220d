package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
)

// errLost is what a request lost on the simulated network fails with.
var errLost = errors.New("sim: request lost on the network")

// network is the agents' http.RoundTripper: it serves each request with
// the handler of the agbot its host names, in process, and is where the
// network's faults live: loss (of the request or of the response),
// duplication, delay (and so reordering) and a frozen agbot.
type network struct {
	mu       sync.Mutex
	rng      *rand.Rand
	handlers map[string]http.Handler // by host
	loss     float64                 // chance a request or its response is lost
	dup      float64                 // chance a request is served twice
	delay    time.Duration           // upper bound of a request's random delay
	frozen   map[string]bool         // hosts that answer nothing
	count    map[string]int          // faults applied, by kind
	replay   *replayer               // keeps what real relays deliver; nil without a replaying relay
}

func newNetwork(seed uint64) *network {
	return &network{rng: rand.New(rand.NewPCG(seed, 0x6e6574)), handlers: map[string]http.Handler{},
		frozen: map[string]bool{}, count: map[string]int{}}
}

func (n *network) set(host string, h http.Handler) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.handlers[host] = h
}

// setFaults replaces the network's faults; zero values mean none.
func (n *network) setFaults(loss, dup float64, delay time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.loss, n.dup, n.delay = loss, dup, delay
}

func (n *network) freeze(host string, frozen bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.frozen[host] = frozen
}

// handler returns the handler serving host and whether it is frozen.
func (n *network) handler(host string) (http.Handler, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.handlers[host], n.frozen[host]
}

// draw returns a number in [0, n) from the network's generator.
func (n *network) draw(k int) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.rng.IntN(k)
}

// counted counts one fault applied.
func (n *network) counted(kind string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.count[kind]++
}

// plan draws one request's fate.
func (n *network) plan(host string) (h http.Handler, frozen, lostBefore, lostAfter, dup bool, delay time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	h, frozen = n.handlers[host], n.frozen[host]
	if n.loss > 0 {
		lostBefore = n.rng.Float64() < n.loss/2
		lostAfter = n.rng.Float64() < n.loss/2
	}
	dup = n.dup > 0 && n.rng.Float64() < n.dup
	if n.delay > 0 {
		delay = time.Duration(n.rng.Int64N(int64(n.delay)))
	}
	for kind, on := range map[string]bool{"net.lost": lostBefore || lostAfter, "net.dup": dup, "net.delay": delay > 0, "net.frozen": frozen} {
		if on {
			n.count[kind]++
		}
	}
	return h, frozen, lostBefore, lostAfter, dup, delay
}

// RoundTrip implements http.RoundTripper.
func (n *network) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	h, frozen, lostBefore, lostAfter, dup, delay := n.plan(req.URL.Host)
	ctx := req.Context()
	if h == nil || frozen {
		<-ctx.Done() // an agbot that answers nothing: the caller's timeout ends it
		return nil, ctx.Err()
	}
	if delay > 0 {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay):
		}
	}
	if lostBefore {
		return nil, errLost
	}
	serve := func() *http.Response {
		r := req.Clone(ctx)
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.RequestURI = r.URL.RequestURI()
		r.RemoteAddr = "192.0.2.1:1234"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec.Result()
	}
	resp := serve()
	if n.replay != nil && h != http.Handler(n.replay) {
		n.replay.keep(req, resp)
	}
	if dup {
		_ = serve() // the duplicate's answer goes nowhere
	}
	if lostAfter {
		return nil, errLost
	}
	return resp, nil
}

// faultyState is one agbot process's state.Backend: it fails every call
// with state.ErrStateUnavailable while the state is down (an outage
// every agbot sees), and holds every call while its agbot is frozen.
type faultyState struct {
	state.Backend
	outage *outage
	mu     sync.Mutex
	thaw   chan struct{} // non-nil while the agbot is frozen: closed when it thaws
	armed  bool          // freeze once Due has claimed records
}

// outage is the state being down, for every agbot at once.
type outage struct {
	mu   sync.Mutex
	down bool
}

func (o *outage) set(down bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.down = down
}

// freeze holds the agbot's calls until it thaws: a process paused (a
// stop-the-world pause, a suspended VM) whose calls in flight land late.
func (s *faultyState) freeze(frozen bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case frozen && s.thaw == nil:
		s.thaw = make(chan struct{})
	case !frozen && s.thaw != nil:
		close(s.thaw)
		s.thaw = nil
	}
	if !frozen {
		s.armed = false
	}
}

// freezeAfterClaim freezes the agbot once its next Due claims records:
// paused in the middle of a batch, holding claims, with the calls that
// store and send its messages waiting.
// frozen says the agbot's state calls wait.
func (s *faultyState) frozen() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.thaw != nil || s.armed
}

func (s *faultyState) freezeAfterClaim() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.thaw == nil {
		s.armed = true
	}
}

func (s *faultyState) check(ctx context.Context) error {
	s.mu.Lock()
	thaw := s.thaw
	s.mu.Unlock()
	if thaw != nil {
		select {
		case <-thaw:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.outage.mu.Lock()
	defer s.outage.mu.Unlock()
	if s.outage.down {
		return fmt.Errorf("sim: state down: %w", state.ErrStateUnavailable)
	}
	return nil
}

// memberState is a faultyState over a shared state, with its membership:
// a heartbeat fails while the state is down and waits while the agbot is
// frozen, so that its lease runs out.
type memberState struct {
	*faultyState
	m state.Membership
}

func (s memberState) Join(ctx context.Context, member string) (state.MemberLease, error) {
	if err := s.check(ctx); err != nil {
		return state.MemberLease{}, err
	}
	return s.m.Join(ctx, member)
}

func (s memberState) Heartbeat(ctx context.Context, member string) (state.MemberLease, error) {
	if err := s.check(ctx); err != nil {
		return state.MemberLease{}, err
	}
	return s.m.Heartbeat(ctx, member)
}

func (s memberState) Leave(ctx context.Context, member string) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	return s.m.Leave(ctx, member)
}

func (s *faultyState) Create(ctx context.Context, rec *state.Record) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	return s.Backend.Create(ctx, rec)
}

func (s *faultyState) Get(ctx context.Context, id string) (state.Record, error) {
	if err := s.check(ctx); err != nil {
		return state.Record{}, err
	}
	return s.Backend.Get(ctx, id)
}

func (s *faultyState) Update(ctx context.Context, member string, recs ...*state.Record) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	return s.Backend.Update(ctx, member, recs...)
}

func (s *faultyState) Rebind(ctx context.Context, member string, rec *state.Record) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	return s.Backend.Rebind(ctx, member, rec)
}

func (s *faultyState) Delete(ctx context.Context, ids ...string) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	return s.Backend.Delete(ctx, ids...)
}

func (s *faultyState) Records(ctx context.Context, fn func(state.Record) bool) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	return s.Backend.Records(ctx, fn)
}

func (s *faultyState) Names(ctx context.Context, member string) ([]string, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	return s.Backend.Names(ctx, member)
}

func (s *faultyState) MarkDue(ctx context.Context, sel state.Selector, at time.Time, reset bool) (int, error) {
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	return s.Backend.MarkDue(ctx, sel, at, reset)
}

func (s *faultyState) Due(ctx context.Context, member string, now time.Time, lease time.Duration, limit int) ([]state.Record, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	recs, err := s.Backend.Due(ctx, member, now, lease, limit)
	if err == nil && len(recs) > 0 {
		s.mu.Lock()
		if s.armed {
			s.armed = false
			s.thaw = make(chan struct{})
		}
		s.mu.Unlock()
	}
	return recs, err
}

func (s *faultyState) Observations(ctx context.Context, names []string) (map[string]state.Observation, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	return s.Backend.Observations(ctx, names)
}

func (s *faultyState) PutObservations(ctx context.Context, member string, obs ...state.Observation) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	return s.Backend.PutObservations(ctx, member, obs...)
}

func (s *faultyState) PutWait(ctx context.Context, w state.Wait) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	return s.Backend.PutWait(ctx, w)
}

func (s *faultyState) Waits(ctx context.Context) ([]state.Wait, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	return s.Backend.Waits(ctx)
}

func (s *faultyState) DeleteWait(ctx context.Context, id string) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	return s.Backend.DeleteWait(ctx, id)
}

func (s *faultyState) NewEpoch(ctx context.Context) (uint64, error) {
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	return s.Backend.NewEpoch(ctx)
}

// Close leaves the shared state open: an agbot that stops does not close
// what the next one uses.
func (s *faultyState) Close() error { return nil }

// losingCerts is an identity.CertStore that can lose an instance's record:
// Get answers not found for it until the instance registers again.
type losingCerts struct {
	identity.CertStore
	mu   sync.Mutex
	lost map[string]bool // by instance id
}

func (c *losingCerts) lose(instanceID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lost[instanceID] = true
}

func (c *losingCerts) Get(ctx context.Context, provider, instanceID string) (identity.Record, error) {
	c.mu.Lock()
	lost := c.lost[instanceID]
	c.mu.Unlock()
	if lost {
		return identity.Record{}, fmt.Errorf("sim: identity record of %s lost: %w", instanceID, edgesecrets.ErrNotFound)
	}
	return c.CertStore.Get(ctx, provider, instanceID)
}

func (c *losingCerts) Put(ctx context.Context, rec identity.Record) (identity.Record, error) {
	c.mu.Lock()
	delete(c.lost, rec.Instance.InstanceID)
	c.mu.Unlock()
	return c.CertStore.Put(ctx, rec)
}
