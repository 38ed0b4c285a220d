// Package state is the contract between the delivery engine
// (agreement/delivery) and a state backend: the engine's durable memory
// of agreements, of what it observed of store secrets, of deployments
// waiting for secrets and of sequence epochs. It never holds a secret
// value.
//
// Backend is the contract, one interface per concern (Records, Schedule,
// Observations, Waits, Epochs) and Close; the value types (Record and its
// parts, Observation, Wait, Selector) are what goes in and out of it, by
// value; the errors (ErrNotFound, ErrExists, ErrConflict,
// ErrStateUnavailable, ErrLeaseLost, ConflictError) are what it returns.
// A Backend that several agbots share also implements Membership and may
// implement SharedReview, which the engine finds by type assertion: a
// wrapper around a shared Backend (for logging, for metrics) must keep
// those methods too. Without them the engine never joins, the shared
// Backend refuses its calls with ErrLeaseLost, and the engine's Health
// says so.
//
// A Backend may keep times to the microsecond (PostgreSQL does), never
// coarser and never rounding up: the engine tells its own cycle's sighting
// of a secret from an earlier one's by CheckedAt.
//
// Implementations: Memory (NewMemory) in this package, for tests and for
// agbots that may lose their state on restart; delivery/boltstate, one
// embedded file for one agbot; delivery/pgstate, PostgreSQL shared by
// several agbots. An embedder passes one to delivery.Options.State and
// otherwise needs this package only for the records it reads back.
//
// The conformance suite state/statetest runs every implementation through
// the same cases: records round-trip exactly and are deep-copied in and
// out, Update and Rebind compare-and-set on Revision, the index from store
// names to records, the due queue's order, selectors and claims, the
// observations and content tags, waits, epochs above every earlier one
// (across a reopen of a durable Backend, which keeps everything),
// concurrent updates, context cancellation, ErrStateUnavailable after
// Close, that a canary secret value is never stored, and, for a shared
// Backend, the leases of several members.
package state
