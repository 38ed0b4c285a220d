package edgesecrets_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/pgstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/relay"
)

// One error model: every package's error kinds and refinements match
// exactly one of the module's kinds with errors.Is, also wrapped, and the
// refinements match what they refine.
func TestEveryKindIsTheModulesOrRefinesOne(t *testing.T) {
	kinds := []error{edgesecrets.ErrNotFound, edgesecrets.ErrPermission, edgesecrets.ErrUnavailable, edgesecrets.ErrConflict, edgesecrets.ErrInvalid}
	for _, tc := range []struct {
		name    string
		err     error
		kind    error
		refines []error
	}{
		{"agreement.ErrNotAuthentic", agreement.ErrNotAuthentic, edgesecrets.ErrPermission, nil},
		{"agreement.ErrSuiteNotAllowed", agreement.ErrSuiteNotAllowed, edgesecrets.ErrPermission, []error{agreement.ErrNotAuthentic}},
		{"agreement.ErrWrongRecipient", agreement.ErrWrongRecipient, edgesecrets.ErrPermission, []error{agreement.ErrNotAuthentic}},
		{"agreement.ErrWrongSender", agreement.ErrWrongSender, edgesecrets.ErrPermission, []error{agreement.ErrNotAuthentic}},
		{"agreement.ErrBadSignature", agreement.ErrBadSignature, edgesecrets.ErrPermission, []error{agreement.ErrNotAuthentic}},
		{"agreement.ErrDecrypt", agreement.ErrDecrypt, edgesecrets.ErrPermission, []error{agreement.ErrNotAuthentic}},
		{"agreement.ErrReplay", agreement.ErrReplay, edgesecrets.ErrConflict, nil},
		{"identity.ErrUnauthenticated", identity.ErrUnauthenticated, edgesecrets.ErrPermission, nil},
		{"identity.ErrForbidden", identity.ErrForbidden, edgesecrets.ErrPermission, nil},
		{"identity.ErrReplayed", identity.ErrReplayed, edgesecrets.ErrConflict, nil},
		{"state.ErrNotFound", state.ErrNotFound, edgesecrets.ErrNotFound, nil},
		{"state.ErrExists", state.ErrExists, edgesecrets.ErrConflict, nil},
		{"state.ErrConflict", state.ErrConflict, edgesecrets.ErrConflict, nil},
		{"state.ErrStateUnavailable", state.ErrStateUnavailable, edgesecrets.ErrUnavailable, nil},
		{"state.ErrLeaseLost", state.ErrLeaseLost, edgesecrets.ErrConflict, nil},
		{"pgstate.ErrSchemaNewer", pgstate.ErrSchemaNewer, edgesecrets.ErrInvalid, nil},
		{"relay.ErrMailboxFull", relay.ErrMailboxFull, edgesecrets.ErrUnavailable, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, err := range []error{tc.err, fmt.Errorf("wrapped: %w", tc.err)} {
				for _, k := range kinds {
					assert.Equal(t, k == tc.kind, errors.Is(err, k), "%v matches %v", err, k) //nolint:errorlint // compares the table's values, not an error chain
				}
				assert.Equal(t, tc.kind, edgesecrets.KindOf(err))
				for _, r := range tc.refines {
					assert.ErrorIs(t, err, r)
				}
			}
		})
	}
	// The identity package's ErrIdentityLost is a reason, not a kind: a
	// refusal carrying it also matches its kind.
	for _, reason := range []error{identity.ErrRevoked, identity.ErrExpired, identity.ErrUnknownInstance} {
		assert.ErrorIs(t, reason, identity.ErrIdentityLost)
	}
}
