package delivery

import (
	"maps"
	"slices"
	"strings"

	"github.com/edgesecrets/edgesecrets/binding"
)

// Clone returns a deep copy of r.
func (r Record) Clone() Record {
	r.Services = cloneServices(r.Services)
	r.Slots = slices.Clone(r.Slots)
	if r.Cancel != nil {
		c := *r.Cancel
		r.Cancel = &c
	}
	if r.Held != nil {
		c := *r.Held
		r.Held = &c
	}
	if r.InFlight != nil {
		s := *r.InFlight
		s.Contents = maps.Clone(s.Contents)
		r.InFlight = &s
	}
	return r
}

func cloneServices(services []binding.ServiceBinding) []binding.ServiceBinding {
	if services == nil {
		return nil
	}
	out := make([]binding.ServiceBinding, len(services))
	for i, sb := range services {
		secrets := make(map[string]binding.BoundSecret, len(sb.Secrets))
		for name, b := range sb.Secrets {
			b.StoreNames = slices.Clone(b.StoreNames)
			secrets[name] = b
		}
		out[i] = binding.ServiceBinding{Service: sb.Service, Secrets: secrets}
	}
	return out
}

// neverSent reports whether no message of r was ever sealed: its agent
// never heard of it. (Register gives a record its epoch; Counter counts the
// sequences taken within it.)
func (r *Record) neverSent() bool { return r.Counter == 0 && r.InFlight == nil }

// agentToBeTold reports whether the agent of an ending agreement is still
// to acknowledge its cancellation: it was sent something, and it has not
// acknowledged the cancellation yet (PhaseCancelled).
func (r *Record) agentToBeTold() bool { return r.Phase == PhaseCancelling && !r.neverSent() }

// hookPending reports whether the cancel hook is yet to return for r's
// cancellation (an agreement the embedder ended has none to call).
func (r *Record) hookPending() bool { return r.Cancel != nil && !r.Cancel.Notified }

// joinIDs lists ids for an error message, at most ten of them.
func joinIDs(ids []string) string {
	const most = 10
	if len(ids) <= most {
		return strings.Join(ids, ", ")
	}
	return strings.Join(ids[:most], ", ") + ", …"
}
