// Package driver is the interface a secretstore backend implements, and
// all a backend author needs besides it. Programs never use it: they use
// the portable type, *secretstore.Store, which a backend's constructor
// returns by wrapping its driver with secretstore.New, as Go CDK's
// blob.Bucket wraps a driver.Bucket.
//
// The portable type enforces the rules every store shares, so a driver
// does not: it validates names, secrets and List prefixes (a driver sees
// valid, scoped names only: "<scope>/<name>"), refuses calls after Close
// and with a context already done, reads the current secret before a Put
// and skips the write when nothing would change (and fails a create-only
// or compare-and-set Put whose condition the read already rules out),
// deep-copies whatever crosses the interface, sorts and filters List
// results, counts calls, retries ErrUnavailable failures within the
// caller's deadline, and wraps every error with the operation and the
// secret's name. A driver implements the store's own semantics — reads,
// writes, versions, labels, atomic compare-and-set — and makes one attempt
// per call; secretstore/storetest proves it.
//
// Errors: a driver returns a *secretstore.Error with Kind and Err set (the
// portable type fills in Op and Name), its Kind one of the error kinds of
// package secretstore: ErrNotFound, ErrPermission, ErrUnavailable,
// ErrConflict and ErrInvalid (the portable type reports any other error as
// ErrUnavailable). Causes are built from status and error codes, never from
// request or response bodies: no error may hold a secret value or a
// credential. A driver returns the context's error when a call ends because
// its context did.
package driver

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/edgesecrets/edgesecrets"
)

// Secret is one revision of a secret as a driver reads or writes it: Get
// fills every field, Stat every field but Data.
//
// It prints (fmt, slog) its metadata and key names, never a value.
type Secret struct {
	// Data holds the values by key; it never prints them (encoding/json
	// included).
	Data edgesecrets.Data
	// Labels are the non-secret key/value metadata.
	Labels map[string]string
	// Version identifies the revision, opaque; empty for a store without
	// versions.
	Version string
	// UpdatedAt is when the revision was written; zero if unknown.
	UpdatedAt time.Time
}

// Format implements fmt.Formatter: every verb prints key names, labels and
// version only.
func (s Secret) Format(f fmt.State, _ rune) {
	_, _ = fmt.Fprintf(f, "{Data:%v Labels:%v Version:%s UpdatedAt:%s}",
		slices.Sorted(maps.Keys(s.Data)), s.Labels, s.Version, s.UpdatedAt.Format(time.RFC3339Nano))
}

// LogValue implements slog.LogValuer: key names, labels and version.
func (s Secret) LogValue() slog.Value {
	return slog.GroupValue(slog.Any("keys", slices.Sorted(maps.Keys(s.Data))), slog.Any("labels", s.Labels), slog.String("version", s.Version))
}

// Write is a Put the portable type has validated and found to change
// something: the secret is missing, or its data or labels differ.
type Write struct {
	// Name is the secret's scoped name.
	Name string
	// Data and Labels are the new content, a full replacement. The driver
	// may keep them: they are copies.
	Data   map[string][]byte
	Labels map[string]string
	// Current is what Get returned for Name just before, or nil when it
	// returned ErrNotFound. A driver writes what differs from it and may
	// trust it as far as its own compare-and-set allows. Its Data is nil
	// when Get failed with ErrInvalid (a value the driver cannot read,
	// written by another tool): the write replaces it.
	Current *Secret
	// Token is an idempotency key, the same for every attempt of one Put:
	// after a write failed with ErrUnavailable, a compare-and-set or
	// create-only Put calls Put again with the same Write, and a store
	// that takes such a key (AWS's ClientRequestToken) recognises a write
	// that landed although its answer was lost. 36 characters.
	Token string
	// IfVersion, when set, is Current.Version: the write must fail with
	// ErrConflict unless the secret's version is still IfVersion, checked
	// atomically by the store when it can.
	IfVersion string
	// CreateOnly: the write must fail with ErrConflict if the secret has
	// come to exist since Current was read (Current is nil).
	CreateOnly bool
}

// Store is what a backend implements. Names are scoped and valid (see the
// package documentation); every method is called by one goroutine or
// many at once, so it must be safe for concurrent use.
type Store interface {
	// Get returns the secret's current revision, or ErrNotFound.
	Get(ctx context.Context, name string) (*Secret, error)
	// Stat returns the secret's metadata (Data is ignored), or
	// ErrNotFound, reading no value when the store allows.
	Stat(ctx context.Context, name string) (*Secret, error)
	// Put makes one write (see Write).
	Put(ctx context.Context, w *Write) error
	// Delete removes the secret; a missing one is not an error.
	Delete(ctx context.Context, name string) error
	// List returns the names of the secrets whose name starts with prefix
	// (a plain string prefix), following every page. The portable type
	// filters, sorts and de-duplicates the result.
	List(ctx context.Context, prefix string) ([]string, error)
	// Close releases the driver's resources; the portable type calls it
	// once.
	Close() error
}

// A driver may implement any of the optional interfaces below; the
// portable type uses them when present. It also passes Store.As on to a
// driver method As(target any) bool, when the driver has one, so that
// programs can reach the driver's client (see secretstore.Store.As).

// BatchGetter reads several secrets in one call (AWS BatchGetSecretValue).
type BatchGetter interface {
	// GetBatch returns the secrets that exist among names, keyed by name;
	// missing ones are absent.
	GetBatch(ctx context.Context, names []string) (map[string]*Secret, error)
}

// BatchStater reads the metadata of many secrets in few calls (AWS
// ListSecrets), for the watcher. The result may lag or leave out names: a
// name absent from it is asked about once more with Stat, so absence can
// mean deleted, refused or merely not listed.
type BatchStater interface {
	// StatBatch returns metadata (as Stat does) of names, keyed by name.
	StatBatch(ctx context.Context, names []string) (map[string]*Secret, error)
}

// CredentialChecker tells whether the store accepts the caller's own
// credentials (a Vault token, AWS keys), apart from any one secret.
type CredentialChecker interface {
	// CheckCredentials returns nil when the store accepts the
	// credentials, ErrPermission when it rejects them (naming why, never
	// the credential), ErrUnavailable when it cannot tell. The portable
	// type reports any other kind as ErrUnavailable.
	CheckCredentials(ctx context.Context) error
}

// ValueLimiter tells the most data one secret of the store may hold, so
// that a write over it is refused with a clear error before it is sent.
type ValueLimiter interface {
	// MaxValueBytes returns the limit in bytes, counted as the sum of
	// the lengths of a secret's data keys and values. A backend's
	// encoding adds to the data (JSON quoting, base64), so a secret just
	// under the limit may still be refused by the backend itself.
	MaxValueBytes() int
}
