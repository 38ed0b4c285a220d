// Package secretstore is the portable interface to a hub's secret store and
// the layer every other edgesecrets package stands on.
//
// A [Store] holds [Secret]s by slash-separated name relative to a scope:
// Get, Stat (metadata only), Put (full replace; compare-and-set and
// create-only through [PutOptions]; a write that changes nothing never
// reaches the backend), idempotent Delete, List by prefix, GetBatch,
// StatBatch and CheckCredentials. Errors match one kind each with errors.Is:
// [edgesecrets.ErrNotFound], [edgesecrets.ErrPermission], [edgesecrets.ErrUnavailable], [edgesecrets.ErrConflict],
// [edgesecrets.ErrInvalid]; they name the operation and the secret, never a value.
//
// Store is a concrete type over a backend's driver (package
// secretstore/driver), as Go CDK's blob.Bucket is over a driver.Bucket: the
// rules every store shares are enforced here once (names, closed stores,
// unchanged writes, copies, error wrapping, call counts), and a backend
// implements only what is its own. Store is also the one retry layer: a
// call failing with edgesecrets.ErrUnavailable is tried again, within the caller's
// context deadline ([Options]).
//
// A Secret's values never print: fmt (every verb), log/slog and
// encoding/json show key names with [edgesecrets.Redacted]. Code that must carry values
// encodes them explicitly (see agreement.SecretDetails).
//
// Backends register by type name, as database/sql drivers do, and [Open]
// builds one from a JSON [Config]:
//
//	import _ "github.com/edgesecrets/edgesecrets/secretstore/vault"
//	store, err := secretstore.Open(ctx, cfg, secretstore.OpenOptions{})
//
// The in-tree backends are secretstore/memory, secretstore/vault and
// secretstore/awssm, each with a constructor of its own (memory.New,
// vault.New, awssm.New) returning a *Store; an out-of-tree backend
// implements driver.Store, wraps it with [New], registers a [Backend] from
// its init function and proves itself with secretstore/storetest.
//
// A Store records when the backend last answered (LastSuccess, the
// agbot's /health) and counts calls (Stats). The agbot's delivery engine
// (package agreement/delivery) watches the secrets its agreements bind
// with these calls: Stat, or StatBatch where the backend lists metadata in
// pages (as AWS does), and CheckCredentials every cycle, so an expired
// token (every name refused) is never mistaken for revoked secrets. Its
// watcher is internal to the module, not part of this package's API.
//
// Tests of this package and its backends run time through testing/synctest
// where they can; no type here takes a clock.
package secretstore
