package agentapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/edgesecrets/edgesecrets"
)

// TokenTable is an instance id → token table, the usual way services
// authenticate to the handler (HandlerOptions.Authenticate =
// table.Authenticate): an agent sets an instance's token when it starts the
// instance's container and deletes it when it removes the instance (with
// Options.Tokens, Store.Remove does so). It may change while the handler
// serves, and is safe for concurrent use: lookups take no lock, and Set and
// Delete copy the table (a node runs few instances). The zero value is an
// empty table; a TokenTable must not be copied after first use.
//
// A token should be unguessable; crypto/rand.Text makes a good one.
// Printing the table (fmt with any verb, slog) shows instance ids only,
// each token as [edgesecrets.Redacted].
type TokenTable struct {
	mu sync.Mutex // serialises writers
	// byID is replaced on every change, never modified, so lookups (one
	// per request) take no lock. Behind a pointer, it also keeps fmt,
	// printing a struct that holds a TokenTable, to an address rather than
	// the tokens.
	byID atomic.Pointer[map[string]string]
}

// Token returns the instance's token, or false when the instance has none.
func (t *TokenTable) Token(_ context.Context, instanceID string) (string, bool) {
	m := t.byID.Load()
	if m == nil {
		return "", false
	}
	token, ok := (*m)[instanceID]
	return token, ok
}

// Authenticate checks HTTP Basic credentials whose user id is an instance
// id and whose password is that instance's token, and returns the instance
// id; it is meant for HandlerOptions.Authenticate. The comparison takes the
// same time whatever the tokens are, and whether or not the id is known; an
// instance without a token never authenticates.
func (t *TokenTable) Authenticate(ctx context.Context, user, password string) (instanceID string, ok bool) {
	want, known := t.Token(ctx, user)
	known = known && want != ""
	got, exp := sha256.Sum256([]byte(password)), sha256.Sum256([]byte(want))
	if subtle.ConstantTimeCompare(got[:], exp[:]) == 1 && known {
		return user, true
	}
	return "", false
}

// Set gives an instance its token, replacing any token it had. The
// instance id must pass agreement.CheckSecretName and contain no colon (it is the HTTP
// Basic user id) and the token must not be empty; otherwise the error
// matches edgesecrets.ErrInvalid and the table is unchanged. The error
// never contains the token.
func (t *TokenTable) Set(instanceID, token string) error {
	if err := checkInstanceID(instanceID); err != nil {
		return fmt.Errorf("agentapi: token table: %w", err)
	}
	if token == "" {
		return fmt.Errorf("agentapi: token table: instance %s: %w: the token is empty", quoteName(instanceID), edgesecrets.ErrInvalid)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	m := map[string]string{}
	if old := t.byID.Load(); old != nil {
		m = maps.Clone(*old)
	}
	m[instanceID] = token
	t.byID.Store(&m)
	return nil
}

// Delete removes the tokens of the instances, so they no longer
// authenticate. Unknown ids are ignored.
func (t *TokenTable) Delete(instanceIDs ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.byID.Load()
	if old == nil {
		return
	}
	m := maps.Clone(*old)
	for _, id := range instanceIDs {
		delete(m, id)
	}
	t.byID.Store(&m)
}

// IDs returns the instance ids that have a token, sorted.
func (t *TokenTable) IDs() []string {
	m := t.byID.Load()
	if m == nil {
		return []string{}
	}
	return slices.Sorted(maps.Keys(*m))
}

// Format implements fmt.Formatter: the instance ids with each token
// redacted, for every verb. %v prints map[<id>:[redacted] ...]; %#v prints
// &agentapi.TokenTable{"<id>":[redacted], ...}.
func (t *TokenTable) Format(f fmt.State, verb rune) {
	if t == nil {
		_, _ = io.WriteString(f, "<nil>") // see formatTokens
		return
	}
	formatTokens(f, verb, "&agentapi.TokenTable{", t.IDs())
}

// String returns the %v form: instance ids, tokens redacted.
func (t *TokenTable) String() string { return fmt.Sprint(t) }

// LogValue implements slog.LogValuer: a group of instance ids, each
// [edgesecrets.Redacted].
func (t *TokenTable) LogValue() slog.Value {
	if t == nil {
		return slog.GroupValue()
	}
	return tokensLogValue(t.IDs())
}

// MarshalJSON implements json.Marshaler: {"<id>":"[redacted]",...}.
func (t *TokenTable) MarshalJSON() ([]byte, error) {
	if t == nil {
		return []byte("null"), nil
	}
	return tokensJSON(t.IDs())
}

// formatTokens prints token table ids with redacted tokens: map[id:x ...],
// or for %#v goPrefix"id":x, ...}.
func formatTokens(f fmt.State, verb rune, goPrefix string, ids []string) {
	var b strings.Builder
	if verb == 'v' && f.Flag('#') {
		b.WriteString(goPrefix)
		for i, id := range ids {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%q:%s", id, edgesecrets.Redacted)
		}
		b.WriteString("}")
	} else {
		b.WriteString("map[")
		for i, id := range ids {
			if i > 0 {
				b.WriteString(" ")
			}
			b.WriteString(id + ":" + edgesecrets.Redacted)
		}
		b.WriteString("]")
	}
	// f writes to fmt's own buffer, and Format has no error to return.
	_, _ = io.WriteString(f, b.String())
}

func tokensLogValue(ids []string) slog.Value {
	attrs := make([]slog.Attr, len(ids))
	for i, id := range ids {
		attrs[i] = slog.String(id, edgesecrets.Redacted)
	}
	return slog.GroupValue(attrs...)
}

func tokensJSON(ids []string) ([]byte, error) {
	m := make(map[string]string, len(ids))
	for _, id := range ids {
		m[id] = edgesecrets.Redacted
	}
	return json.Marshal(m)
}
