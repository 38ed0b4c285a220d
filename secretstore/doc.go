// Package secretstore is the portable interface to a hub's secret store and
// the layer every other edgesecrets package stands on.
//
// A [Store] holds [Secret]s by slash-separated name relative to a scope:
// Get, Stat (metadata only), Put (full replace; compare-and-set and
// create-only through [PutOptions]; a write that changes nothing never
// reaches the backend), idempotent Delete, and List by prefix. Errors match
// one kind each with errors.Is: [ErrNotFound], [ErrPermission],
// [ErrUnavailable], [ErrConflict], [ErrInvalid]; they name the operation and
// the secret, never a value.
//
// A Secret's values never print: fmt (every verb), log/slog and
// encoding/json show key names with [Redacted]. Code that must carry values
// encodes them explicitly (see agreement.SecretDetails).
//
// Backends register by type name, as database/sql drivers do, and [Open]
// builds one from a JSON [Config]:
//
//	import _ "github.com/edgesecrets/edgesecrets/secretstore/vault"
//	store, err := secretstore.Open(ctx, cfg)
//
// The in-tree backends are secretstore/memory, secretstore/vault and
// secretstore/awssm; an out-of-tree backend implements [Backend], calls
// [Register] from its init function and proves itself with
// secretstore/storetest.
//
// Middleware wraps any Store: [Monitor] records the last successful backend
// interaction (the agbot's /health) and counts calls; [Reader] coalesces
// concurrent reads of one name and serves repeats for a short TTL, so an
// agbot making N agreements over M secrets reads the backend O(M) times.
// [Watcher] polls Stat for a changing set of names and reports rotation,
// deletion, revocation and outages, one [Cycle] at a time.
//
// A store that can tell whether it accepts the caller's own credentials
// (a Vault token, AWS keys) implements [CredentialChecker]; the watcher runs
// the check every cycle, so an expired token (every name refused) is never
// mistaken for revoked secrets.
package secretstore
