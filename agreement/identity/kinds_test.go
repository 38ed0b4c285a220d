package identity

import (
	"errors"
	"fmt"
	"testing"

	"github.com/edgesecrets/edgesecrets"
	"github.com/stretchr/testify/assert"
)

// Every error kind is one of the module-wide kinds or refines exactly one
// of them; the package's own kinds stay distinct from each other.
func TestKindsAreModuleKinds(t *testing.T) {
	moduleKinds := []error{edgesecrets.ErrInvalid, edgesecrets.ErrPermission, edgesecrets.ErrNotFound, edgesecrets.ErrConflict, edgesecrets.ErrUnavailable}
	ownKinds := []error{ErrUnauthenticated, ErrForbidden, ErrReplayed}
	tests := []struct {
		kind, module error
	}{
		{edgesecrets.ErrInvalid, edgesecrets.ErrInvalid},
		{ErrUnauthenticated, edgesecrets.ErrPermission},
		{ErrForbidden, edgesecrets.ErrPermission},
		{edgesecrets.ErrNotFound, edgesecrets.ErrNotFound},
		{edgesecrets.ErrConflict, edgesecrets.ErrConflict},
		{edgesecrets.ErrUnavailable, edgesecrets.ErrUnavailable},
		{ErrReplayed, edgesecrets.ErrConflict},
	}
	for _, tt := range tests {
		t.Run(tt.kind.Error(), func(t *testing.T) {
			err := &Error{Op: opRefresh, Kind: tt.kind, Reason: "test"}
			wrapped := fmt.Errorf("calling the hub: %w", err)
			for _, m := range moduleKinds {
				assert.Equal(t, m == tt.module, errors.Is(wrapped, m), "matches %v", m) //nolint:errorlint // compares the table's values, not an error chain
			}
			assert.Equal(t, tt.kind, kindOf(wrapped), "its own kind first")
			for _, own := range ownKinds {
				assert.Equal(t, own == tt.kind, errors.Is(wrapped, own), "matches %v", own) //nolint:errorlint // compares the table's values, not an error chain
			}
		})
	}
}
