// Package boltstate is the delivery engine's embedded default state (a
// state.Backend): one file, crash-safe, pure Go, no server. An agbot opens
// it at start:
//
//	st, certs, err := boltstate.Open("/var/lib/agbot/delivery.db", boltstate.Options{})
//
// and hands st to delivery.New as Options.State; certs holds the hub's
// identity records (an identity.CertStore) in the same file.
//
// # Why bbolt
//
// The file is a go.etcd.io/bbolt database (the store under etcd). It is
// small and pure Go (no cgo, so the agbot stays one static binary); it has
// a single writer and copy-on-write pages, and each commit is fsync'd
// before it returns, so a crash or kill -9 leaves the file at its last
// commit, never half-written; and it is a sorted key-value store, which
// is all the engine's access needs (a record by id, records by index key
// in order). SQLite (modernc.org/sqlite) would do too, at the price of a
// much larger transpiled dependency and SQL for what are key lookups and
// range scans. Several agbots sharing their state use PostgreSQL instead.
//
// # Safety
//
// Open creates the file with mode 0600 in a directory it creates with mode
// 0700 (and makes an existing file others could read 0600). bbolt locks the
// file: a second agbot, or a second Open, waits Options.LockTimeout and
// gets an error saying the file is in use. The file never holds a secret
// value: records hold store names, content tags (a checksum tag in full,
// as a password hash would be kept) and sequences.
//
// # Writes
//
// Every write is a transaction. Update of many records is one
// transaction; concurrent calls are group-committed: a writer goroutine
// takes every write waiting when it starts a transaction and commits them
// together: W goroutines writing at once share commits (640 single
// updates from 64 goroutines took 18 in a test), while a lone write waits
// for no one. A commit costs an fsync (milliseconds on a disk), so a
// fan-out is fastest as few Updates of many records. When one write of a
// group fails, the others are committed alone.
//
// # Schema
//
// Buckets, keys as raw bytes so ids and names are kept exactly:
//
//	meta          "schema" → version (big-endian uint64), "epoch" → NewEpoch's counter
//	records       agreement id → record: format byte, revision, services
//	              (written by Create, copied by later writes), node and
//	              NextAttempt (what the indexes need), then the rest
//	by-name       store name → bucket of ids binding it (any candidate); its keys are Names
//	by-node       node → bucket of ids
//	due           NextAttempt (seconds, nanoseconds since the zero time,
//	              big-endian) + id → nothing; Due reads it in order, so it
//	              costs what it returns, not what is stored
//	observations  store name → state, content tag, since, checked at
//	waits         deployment id → store names, created at
//	identities    provider length, provider, instance id → identity record
//
// Values are a format byte and a compact binary encoding (varints,
// length-prefixed strings, times to the nanosecond). Records of format 2
// end with Unanswered; those of format 1, written before it was kept, read
// with it zero and take format 2 when next written. A file of an older
// schema version is migrated by Open in the same transaction that opens
// it; a file of a newer version is refused, never rewritten.
//
// One engine uses a file: member ids are ignored and Due's claims are only
// NextAttempt moved to now+lease.
package boltstate
