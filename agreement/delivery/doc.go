// Package delivery is the agbot's delivery engine: it keeps the secrets on
// every node in step with the secret store, durably and level-triggered,
// the way a Kubernetes controller converges desired state.
//
// An agbot embeds one Engine. It registers each agreement with its bindings
// resolved to store names (binding.Report.Bindings), and the engine does the
// rest: it proposes the agreement to the node's agent, watches the bound
// store secrets, sends updates when they rotate, falls back to the next
// candidate when a node-level secret is deleted, and cancels the agreement
// when a bound secret is revoked for good. The agent side needs none of
// this package: it opens envelopes with package agreement and applies them
// with package agentapi.
//
// # Level-triggered
//
// For each agreement and service secret the State records the desired
// content (store name and content tag, never the value) and the content the
// agent last acknowledged. A reconcile loop drives acknowledged toward
// desired for as long as the agreement exists: an attempt that fails or
// gets no reply is tried again after a capped backoff that is never
// exhausted. Values are read when a message is sealed, through a coalescing
// reader, so the newest content always wins and an update superseded before
// it was sent is never sent. An agent that comes back (Engine.Resync, or
// new keys, which make the engine propose again) is resynced at once. An
// agent that never answers is reported diverged and kept.
//
// A binding may name several candidate store secrets (a node-level secret
// first, then the organisation- or user-level one): the first that exists is
// desired, so deleting the node-level secret delivers the next one.
//
// A binding that changes on a live agreement (its secretBinding names other
// store secrets for the same service secrets) is delivered in place:
// registering the agreement again with the new store names rebinds it
// (state.Backend.Rebind, compare-and-set and fenced like every write), and
// the reconcile loop sends the new content as an update, exactly as for a
// rotation. The agent keeps the old content until it accepts the new, and
// its services keep running on the same instance. Other services or
// secret names are a new agreement, which Register refuses.
//
// # Reasons
//
// An agreement the engine cannot deliver now is never a silent wait. Its
// Status.Reason, and Health.Reasons for all of them, carry a code from a
// small closed set (ReasonCode: an agent that cannot be verified, a
// secret its declared format cannot render, a secret absent, the store
// unavailable, …) and a message naming what is wrong; each new cause is
// logged once per agreement, at WARN for those someone must act on, and
// again only when the cause changes or after it cleared. A proposal waits
// for every secret it carries; once proposed, a secret its format cannot
// render holds back only itself: the agreement's other secrets are still
// updated.
//
// # Revocation
//
// A cancellation is never inferred from the agbot's own trouble. A bound
// secret whose every candidate is missing or forbidden cancels its
// agreements only when all of these hold:
//   - the store is otherwise healthy: the backend's own credential check
//     passes in that cycle, and, for forbidden names, other names read
//     fine in that cycle (a cycle where every name is forbidden is the
//     agbot's credentials, not a revocation);
//   - the condition lasted Options.Grace, seen in healthy cycles with no
//     gap longer than about an interval between them (the start of the
//     grace period is stored, so a quick restart neither resets nor skips
//     it; after a longer gap, a store outage, a paused process, a name
//     watched again after a long time, the secret may have come back and
//     gone again unseen, so the grace period starts afresh);
//   - the cycle stays within Options.Budget; beyond it every cancellation
//     of the cycle is held and Health says so.
//
// A store outage cancels nothing and delays nothing but the outage's own
// reads: a first proposal waits for the store like any other message.
// The cancel hook (Options.OnCancel) is called once per decision, after
// the decision is stored; a held cancellation is no decision until
// Engine.ReleaseHeld.
//
// # Replies
//
// A reply is applied only if it opens (sealed by the agent's current
// keys, to the agbot's), its sequence is above the last reply accepted for
// the agreement (Record.ReplySequence, stored with the record), and it
// names the message in flight (agreement.Reply.InReplyTo). An accepted
// message becomes what the agent holds; a rejected one is tried again
// after a backoff and never cancels the agreement. Synchronous transports
// return the reply from Send; others hand it to Engine.HandleReply.
//
// # Sequences
//
// Every envelope of an agreement, proposal, update or cancellation, takes
// its sequence from one series: state.Record.Epoch<<32 | Counter, with
// epochs from state.Backend.NewEpoch. An agent that keeps one sequence
// floor per agreement (agentapi does) therefore applies messages only in
// the order the engine made them, across agbot restarts and takeovers, and never
// applies older content over newer.
//
// # State
//
// The engine's durable memory is a state.Backend (Options.State): the
// contract between the engine and a state backend lives in its own
// package, delivery/state, with the records and errors that cross it and
// a conformance suite (delivery/state/statetest) every implementation
// runs: state.NewMemory for tests, the embedded single-file default
// (delivery/boltstate), and PostgreSQL for several agbots sharing the work
// (delivery/pgstate), which also implements state.Membership. No secret
// value is ever written to it.
package delivery
