// Package storewatch detects rotation: its Watcher polls a
// secretstore.Store for a changing set of secret names and reports, cycle
// by cycle, which were changed, deleted, refused, appeared or could not be
// checked, with counts that tell trouble with the store itself from
// trouble with one secret.
//
// It is the delivery engine's watcher (package agreement/delivery), not an
// embedder's API, and it is internal so that it can change with the
// engine: an embedder learns of rotated and revoked secrets from the
// engine's hooks and status, and reads a store with secretstore.Store
// (Stat, StatBatch, Get, CheckCredentials), the calls this package is
// built on. It imports only package secretstore and the root package.
package storewatch
