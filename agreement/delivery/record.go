// What the engine reads off a record: helpers over state.Record, kept
// here because only the engine needs them (the state package holds the
// type, not the engine's reading of it).

package delivery

import (
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/binding"
)

// cloneServices returns a deep copy of services, as Record.Clone copies
// them.
func cloneServices(services []binding.ServiceBinding) []binding.ServiceBinding {
	return state.Record{Services: services}.Clone().Services
}

// neverSent reports whether no message of r was ever sealed: its agent
// never heard of it. (Register gives a record its epoch; Counter counts the
// sequences taken within it.)
func neverSent(r *state.Record) bool { return r.Counter == 0 && r.InFlight == nil }

// agentToBeTold reports whether the agent of an ending agreement is still
// to acknowledge its cancellation: it was sent something, and it has not
// acknowledged the cancellation yet (PhaseCancelled).
func agentToBeTold(r *state.Record) bool {
	return r.Phase == state.PhaseCancelling && !neverSent(r)
}

// hookPending reports whether the cancel hook is yet to return for r's
// cancellation (an agreement the embedder ended has none to call).
func hookPending(r *state.Record) bool { return r.Cancel != nil && !r.Cancel.Notified }
