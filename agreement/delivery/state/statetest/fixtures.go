package statetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// t0 is the suite's base time: UTC, microsecond precision.
var t0 = time.Date(2031, time.March, 4, 5, 6, 7, 891_234_000, time.UTC)

// at returns t0 plus n seconds.
func at(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }

// versionTag is the tag of a store version.
func versionTag(t testing.TB, v string) secretstore.ContentTag {
	t.Helper()
	tag, err := secretstore.ParseContentTag("version:" + v)
	require.NoError(t, err)
	return tag
}

// sumTag is the checksum tag of a secret {"value": data} in a store
// without versions.
func sumTag(data string) secretstore.ContentTag {
	s := &secretstore.Secret{Data: edgesecrets.Data{"value": []byte(data)}}
	return s.ContentTag()
}

// record returns an active record with every field but NextAttempt set,
// with one service secret per candidate list: even ones in the first
// service, odd ones in a second.
func record(t testing.TB, id, node string, candidates ...[]string) *state.Record {
	t.Helper()
	services := []binding.ServiceBinding{
		{Service: agreement.ServiceRef{Org: "org", URL: "svc-" + id, Arch: "amd64", Version: "1.0.0"}, Secrets: map[string]binding.BoundSecret{}},
		{Service: agreement.ServiceRef{Org: "org", URL: "sidecar", Container: "side"}, Secrets: map[string]binding.BoundSecret{}},
	}
	var slots []state.Slot
	for i, names := range candidates {
		svc := i % 2
		name := fmt.Sprintf("secret%02d", i)
		services[svc].Secrets[name] = binding.BoundSecret{StoreNames: append([]string(nil), names...), Format: "json"}
		slots = append(slots, state.Slot{
			Service: svc,
			Name:    name,
			Desired: state.Content{StoreName: names[0], Tag: versionTag(t, fmt.Sprintf("%d", 10+i))},
			Acked:   state.Content{StoreName: names[len(names)-1], Tag: sumTag(id + name)},
		})
	}
	// Slots are sorted by (Service, Name).
	var sorted []state.Slot
	for svc := range 2 {
		for _, s := range slots {
			if s.Service == svc {
				sorted = append(sorted, s)
			}
		}
	}
	contents := map[int]state.Content{}
	for i, s := range sorted {
		contents[i] = s.Desired
	}
	return &state.Record{
		ID:       id,
		Node:     node,
		Services: services,
		Slots:    sorted,
		Phase:    state.PhaseActive,
		Held: &state.Cancellation{
			Reason: "store secret " + candidates[0][0] + " was deleted", StoreName: candidates[0][0],
			Kind: state.Missing, DecidedAt: at(-30),
		},
		Proposed: true,
		AgentKey: agreement.KeyID("hpke-x25519:" + node),
		Epoch:    7,
		Counter:  3,
		InFlight: &state.Sent{
			Type: agreement.TypeUpdate, Kind: agreement.UpdateKindSecrets, Sequence: 7<<32 | 3,
			Contents: contents, AgentKey: agreement.KeyID("hpke-x25519:" + node), At: at(-5),
		},
		ReplySequence: 41,
		Attempts:      2,
		Unanswered:    at(-20),
		LastError:     "send to node " + node + ": connection refused",
		Rejection:     "agent busy",
		LastReply:     at(-60),
		CreatedAt:     at(-3600),
		UpdatedAt:     at(-5),
	}
}

// simple returns a record bound to the given store names, one service
// secret each, without candidates.
func simple(t testing.TB, id, node string, names ...string) *state.Record {
	t.Helper()
	var candidates [][]string
	for _, n := range names {
		candidates = append(candidates, []string{n})
	}
	return record(t, id, node, candidates...)
}

// norm makes r comparable with a stored copy: times in UTC at microsecond
// precision, empty slices and maps nil.
func norm(r state.Record) state.Record {
	r = r.Clone()
	tm := func(p *time.Time) {
		if p.IsZero() {
			*p = time.Time{}
			return
		}
		*p = p.Truncate(time.Microsecond).UTC()
	}
	for _, p := range []*time.Time{&r.NextAttempt, &r.Unanswered, &r.LastReply, &r.CreatedAt, &r.UpdatedAt} {
		tm(p)
	}
	for _, c := range []*state.Cancellation{r.Cancel, r.Held} {
		if c != nil {
			tm(&c.DecidedAt)
		}
	}
	if r.InFlight != nil {
		tm(&r.InFlight.At)
		if len(r.InFlight.Contents) == 0 {
			r.InFlight.Contents = nil
		}
	}
	if len(r.Services) == 0 {
		r.Services = nil
	}
	for i := range r.Services {
		if len(r.Services[i].Secrets) == 0 {
			r.Services[i].Secrets = nil
		}
	}
	if len(r.Slots) == 0 {
		r.Slots = nil
	}
	return r
}

// assertRecord asserts that got is want as stored.
func assertRecord(t testing.TB, want, got state.Record, msgAndArgs ...any) bool {
	t.Helper()
	return assert.Equal(t, norm(want), norm(got), msgAndArgs...)
}

// sameTime asserts two instants are equal at microsecond precision.
func sameTime(t testing.TB, want, got time.Time, what string) bool {
	t.Helper()
	if want.Truncate(time.Microsecond).Equal(got.Truncate(time.Microsecond)) {
		return true
	}
	t.Errorf("%s: want %v, got %v", what, want, got)
	return false
}
