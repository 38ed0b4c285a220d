// Package pgstate is a state.Backend on PostgreSQL that several agbots
// share: they divide the agreements' delivery and the polling of the store
// secrets between them, and when one dies the others take over its work
// within one lease period. It passes the delivery/state/statetest
// conformance suite on a real server, and it is a state.Membership and a
// state.SharedReview.
//
//	st, certs, err := pgstate.Open(ctx, pgstate.Options{URL: "postgres://agbot@db/hub"})
//	...
//	lease, err := st.Join(ctx, "agbot-1") // then Heartbeat within lease.Period/3
//
// certs holds the hub's identity records (an identity.CertStore, for
// identity.IssuerOptions.Store and VerifierOptions.Store) in the same
// database: every agbot sharing it verifies every agent, an agent
// registers once whichever agbot it reaches, and a request proof one agbot
// accepted is refused by all. It passes the identity/certstoretest
// conformance suite, two agbots sharing it included.
//
// Open Horizon's agbot shares one PostgreSQL database the same way
// (anax, agreementbot/persistence/postgresql/partition.go): each agbot
// heartbeats a row judged by the database's clock, and a partition whose
// heartbeat is stale is taken over. This package leases work per
// agreement instead of per partition, so that no rows move on takeover
// and a change reaches an agreement whichever agbot runs it.
//
// No secret value ever reaches the database: records hold store names,
// content tags (a store version, or a SHA-256 checksum of the value) and
// envelope sequences, never values or envelopes.
//
// # Schema
//
// Open applies the schema's migrations, in one transaction under a
// transaction-level advisory lock: agbots that start at once wait for the
// first one's commit and then find nothing to do. The schema_version
// table records the steps applied; a schema made by a newer agbot is
// refused (ErrSchemaNewer). Tables live in their own PostgreSQL schema
// (Options.Schema), beside whatever else the database holds.
//
//   - agreements: one row per record. The fields the database selects or
//     changes itself are columns: id, node (MarkDue by node), revision
//     (compare-and-set), next_attempt (Due), attempts (MarkDue resets it)
//     and the claim (lease_owner, lease_until). The services are a JSONB
//     column written by Create and Rebind only (no schema change was
//     needed for Rebind: it rewrites the column and the bindings rows in
//     the one fenced statement Update uses); the rest of the
//     record (slots with desired and acknowledged content, the message in
//     flight, cancellations, sequences, diagnostics) is a JSONB body.
//     Slots are not rows: the engine reads and writes a record whole,
//     nothing selects by slot, and rows per slot would multiply the writes
//     of every Update; JSONB keeps them readable to an operator
//     (SELECT body->'slots' FROM agreements). Since schema version 5 the
//     body is also stored in binary (body_bin, the compact form the
//     embedded state uses), which is what the agbots read instead of
//     decoding JSON, on every record the review and Due read. A record
//     without one (written before version 5, or by an agbot of version 4
//     still running during the upgrade: a trigger drops the binary body
//     such a write made stale) is read from its JSON body until it is
//     next written.
//   - bindings (store_name, agreement_id): every candidate store name of
//     every record, indexed by name, so MarkDue by store name is an index
//     scan. Written by Create, replaced by Rebind, removed with the
//     record.
//   - bound_names: one row per name some record binds (a trigger on
//     bindings adds it, the bindings' foreign key keeps it), so that Names
//     reads a row per name, not every binding. Rows of names no longer bound stay until a
//     Join prunes them; Names skips them.
//   - names_generation: a counter every statement that changes the
//     bindings bumps (a trigger), kept in 64 rows, one per writer backend
//     slot, so that writers do not wait for each other; its sum is the
//     generation. Names returns the names again only when the generation
//     or the live members changed since the member's last call, and
//     otherwise reads just those two.
//   - review_cursor: one row, where the anti-entropy review's pass
//     stands; each member's ReviewNext (state.SharedReview) moves it
//     past the next slice and reads that slice in the same statement, so
//     the members review the agreements once per pass between them.
//   - observations: what the watchers last saw of each store name, with
//     the member that wrote it.
//   - observations_generation: the observations' counter, kept as
//     names_generation is. Observations keeps what it read with the
//     generation it was read at and, while the generation is unchanged,
//     reads only the names it has not read: an idle interval reads the
//     counter, not a row per name its review's slice binds.
//   - waits: deployments waiting for store secrets.
//   - members: one row per member id, with its incarnation and the
//     database time its membership expires.
//   - the sequences epochs (NewEpoch) and member_incarnations.
//   - identities: the identity records, one row per (provider,
//     instance_id), compare-and-set on revision; a revoked record stays as
//     a tombstone.
//   - nonces (provider, instance_id, nonce): the request proofs accepted;
//     the primary key makes each single-use across agbots. Each use
//     deletes up to 64 nonces that expired more than a minute before (an
//     allowance for the agbots' clocks), so the table holds about one
//     proof window's nonces.
//
// Ids and names are text in the "C" collation, so that the database
// orders them as Go does; PostgreSQL text cannot hold invalid UTF-8 or
// NUL bytes, so such names are refused (an error matching
// edgesecrets.ErrInvalid), while diagnostics
// (errors, rejection reasons) are stored with such bytes replaced.
//
// # Leases and fencing
//
// The rules below are functions in the schema (see the migrations), so
// that each statement applies them with the database's clock, now(), and
// never an agbot's. They are what a model of the protocol checks.
//
// Membership. Join gives a member id a new incarnation and a membership
// that expires LeasePeriod later; Heartbeat extends it, but only while
// it has not expired and the incarnation is still the member's
// (member_live). A lapsed membership is not renewed: the member must Join
// again, because the others may have taken over its work meanwhile. A
// later Join of the same id (a restarted agbot) replaces the incarnation,
// which fences off the earlier process. Leave expires the membership at
// once.
//
// Claims. Due claims records for the calling member: it sets lease_owner
// and lease_until (the database's now() plus the lease Due is given), and
// moves next_attempt to the caller's now+lease as the state.Backend
// contract says. A claim is valid (claim_valid) while lease_until has not
// passed and its holder is not a member whose membership lapsed or ended;
// so a member that stops heartbeating loses all its claims when its
// membership expires. Due takes a record that is due by the caller's
// clock, or whose claim became void, and that nobody but the caller holds
// a valid claim on. It locks the rows it takes with FOR UPDATE SKIP LOCKED: members
// claiming at once take disjoint records without waiting for each other,
// and the claim is a column, durable and visible to every member, judged
// by one clock. Advisory locks were the alternative and are worse here:
// they belong to a session, so a pooled connection that breaks or is
// recycled drops or keeps them silently, they carry no expiry another
// member can judge, and tens of thousands of them exhaust the server's
// lock table.
//
// Fenced writes. An Update stores a record when its Revision is the
// stored one and may_write holds: nobody but the writer holds a valid
// claim on it, and the writer does not write under a claim of its own
// that lapsed. Storing a record releases the writer's claim: the record
// goes back to the pool with the NextAttempt the engine set. A member
// that joined through the State runs every Update and PutObservations
// behind fence in the same transaction, and Due and Names check the same
// rule in their own statement (two statements fewer an idle interval):
// once its membership lapsed or was replaced, they fail with
// state.ErrLeaseLost and change nothing. (A member id that never joined may claim and store
// records, whose claims then last until they expire, but polls no names.)
//
// Invariants, at every instant of the database's clock:
//   - at most one member holds a valid claim on a record;
//   - a record changes only by a compare-and-set of its revision, and a
//     claim, a mark or a write each change the revision, so a member
//     whose copy predates another member's claim stores nothing;
//   - a member that is not live writes nothing but through Join;
//   - every envelope sequence of a record (Record.Epoch<<32 |
//     Record.Counter) is allocated inside such a write, so the sequences
//     of one record increase in commit order whichever member sent them.
//
// Sends happen after the Update that stores the message in flight, with
// the claim released, and nothing stops a second member from claiming
// the record again once it is due (a MarkDue after a rotation, say) while
// the first send is still on the wire. That duplicate is harmless: the
// second message has a higher sequence and was sealed from a later read
// of the store, and the agent applies messages of an agreement only in
// sequence order.
//
// # Names
//
// The store names are divided among the live members by rendezvous
// hashing (name_owner: the live member with the highest
// hashtextextended(name, hashtextextended(member, 0))), so each bound
// name is polled by exactly one live member per interval, a member that
// joins or leaves moves only its own share, and no table of assignments
// needs keeping. Names(member) returns the member's share.
// PutObservations stores the observations of the member's share and of
// names no record binds (those deployments wait for), and refuses the
// others with a *state.ConflictError listing them: a member that lost
// a name cannot overwrite what its new owner sees. MarkDue is not fenced:
// a change any member finds marks every record bound to the name due, in
// the shared table, and the member that claims each of them next delivers
// it.
//
// A member that stops heartbeating loses its names and its claims to the
// others LeasePeriod after its last heartbeat, whatever lease Due gave its
// claims; tests measure it.
//
// # Connection loss
//
// Every call runs within Options.Timeout. While the database cannot be
// reached (stopped, killed, hung, the network down) every method returns
// an error matching state.ErrStateUnavailable, and works again once it
// is back. Calls the database certainly did not run are run again (a
// session the server ended, a serialization failure), so are calls that
// can be run twice (reads, upserts, deletes). Every connection the pool
// hands out is checked first without a round trip: one whose session
// ended (a server restart, however quick; an administrator) has the end
// of its stream or the server's last message waiting on its socket, and
// is pinged, dropped and replaced by a fresh one before the call's
// statement is sent. A connection idle for more than 100 ms is pinged
// anyway, and the pool is reset after connection trouble, so that the
// dead connections a server restart leaves are never handed out. A membership that lapsed during an outage
// is not renewed: Heartbeat then fails with state.ErrLeaseLost and the
// member joins again.
//
// # What an agbot runs
//
// Only its engine: delivery.New finds state.Membership on the State and,
// with Options.Member set, the engine keeps its membership itself. It
// joins before its first cycle, heartbeats every LeasePeriod/3, stops
// sending once the last MemberLease.Until passed without a renewal (it can
// no longer prove its claims; a message sealed under one is dropped) and
// says so in Health, joins again as a new incarnation on
// state.ErrLeaseLost (after a database outage longer than LeasePeriod,
// say), and leaves when Run returns, so the others take over at once. The
// State's fence stands behind it: once the membership lapsed, Due, Update,
// Names and PutObservations fail with state.ErrLeaseLost until the next
// Join. A *state.ConflictError from PutObservations (the names it lists
// belong to another member now) is a partial success: the engine still
// marks the others due.
package pgstate
