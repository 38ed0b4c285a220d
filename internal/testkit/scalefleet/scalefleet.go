// Package scalefleet loads a fleet of agreements in sync with their
// secrets straight into a state.Backend, for the scale benchmarks of the
// delivery engine on its states: the state as a registered, delivered
// fleet leaves it, without sealing a proposal per agreement.
package scalefleet

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// Secrets is how many store secrets Secret spreads a fleet over.
const Secrets = 1000

// Hot is the secret bound to 1 % of a fleet by Secret.
const Hot = "org/hot"

// Secret is the usual binding of agreement i: Hot when i%100 == 0, one of
// 999 other names otherwise.
func Secret(i int) string {
	if i%100 == 0 {
		return Hot
	}
	return fmt.Sprintf("org/s-%03d", i%(Secrets-1))
}

// ID is agreement i's id.
func ID(i int) string { return fmt.Sprintf("agr-%07d", i) }

// Node is agreement i's node.
func Node(i int) string { return fmt.Sprintf("node-%07d", i) }

// Options say which fleet Load makes.
type Options struct {
	// N is how many agreements are considered: 0 to N-1.
	N int
	// Bind returns the store name agreement i binds; "" leaves it out.
	// Nil means Secret.
	Bind func(i int) string
	// AgentKey returns the key id of the agent that accepted agreement
	// i's proposal; nil or "" means none.
	AgentKey func(i int) agreement.KeyID
	// Member is the member that stores the observations (a shared state
	// wants a member that joined).
	Member string
	// Writers is how many Create calls run at once, so that a durable
	// state commits them in groups; zero means 64.
	Writers int
	// Tags are the content tags of the secrets (Observe made them
	// already); nil means Load makes them.
	Tags map[string]secretstore.ContentTag
}

// Observe puts each secret the fleet binds in store (once) and records
// its observation in st, and returns the content tags.
func Observe(ctx context.Context, st state.Backend, store *secretstore.Store, o Options) (map[string]secretstore.ContentTag, error) {
	bind := o.Bind
	if bind == nil {
		bind = Secret
	}
	now := time.Now()
	tags := map[string]secretstore.ContentTag{}
	for i := range o.N {
		name := bind(i)
		if _, ok := tags[name]; ok || name == "" {
			continue
		}
		if _, err := store.Put(ctx, &secretstore.Secret{Name: name, Data: edgesecrets.Data{"password": []byte("v0")}}, secretstore.PutOptions{}); err != nil {
			return nil, err
		}
		s, err := store.Get(ctx, name)
		if err != nil {
			return nil, err
		}
		tags[name] = s.ContentTag()
		if err := st.PutObservations(ctx, o.Member, state.Observation{Name: name, State: state.Present, Tag: tags[name], Since: now, CheckedAt: now}); err != nil {
			return nil, err
		}
	}
	return tags, nil
}

// Load creates the agreements, each active, proposed and with its agent
// holding the secret's content of Options.Tags, or, when that is nil, of
// the secrets Observe puts. It returns how many it created.
func Load(ctx context.Context, st state.Backend, store *secretstore.Store, o Options) (int, error) {
	bind := o.Bind
	if bind == nil {
		bind = Secret
	}
	writers := o.Writers
	if writers <= 0 {
		writers = 64
	}
	tags := o.Tags
	if tags == nil {
		var err error
		if tags, err = Observe(ctx, st, store, o); err != nil {
			return 0, err
		}
	}
	now := time.Now()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created int
		first   error
	)
	for w := range writers {
		wg.Go(func() {
			for i := w; i < o.N && ctx.Err() == nil; i += writers {
				name := bind(i)
				if name == "" {
					continue
				}
				c := state.Content{StoreName: name, Tag: tags[name]}
				r := &state.Record{
					ID: ID(i), Node: Node(i), Phase: state.PhaseActive,
					Services: []binding.ServiceBinding{{
						Service: agreement.ServiceRef{Org: "org", URL: "svc", Version: "1.0.0"},
						Secrets: map[string]binding.BoundSecret{"pw": {StoreNames: []string{name}}},
					}},
					Slots:    []state.Slot{{Service: 0, Name: "pw", Desired: c, Acked: c}},
					Proposed: true, CreatedAt: now, UpdatedAt: now,
				}
				if o.AgentKey != nil {
					r.AgentKey = o.AgentKey(i)
				}
				err := st.Create(ctx, r)
				mu.Lock()
				if err == nil {
					created++
				} else if first == nil {
					first = fmt.Errorf("scalefleet: agreement %s: %w", r.ID, err)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return created, first
}
