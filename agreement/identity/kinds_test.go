package identity

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/edgesecrets/edgesecrets/secretstore"
)

// Each kind of this package is also the module-wide kind it refines, and
// only that one; the kinds stay distinct from each other.
func TestKindsAreModuleKinds(t *testing.T) {
	moduleKinds := []error{secretstore.ErrInvalid, secretstore.ErrPermission, secretstore.ErrNotFound, secretstore.ErrConflict, secretstore.ErrUnavailable}
	tests := []struct {
		kind, module error
	}{
		{ErrInvalid, secretstore.ErrInvalid},
		{ErrUnauthenticated, secretstore.ErrPermission},
		{ErrForbidden, secretstore.ErrPermission},
		{ErrNotFound, secretstore.ErrNotFound},
		{ErrConflict, secretstore.ErrConflict},
		{ErrUnavailable, secretstore.ErrUnavailable},
		{ErrReplayed, secretstore.ErrConflict},
	}
	for _, tt := range tests {
		t.Run(tt.kind.Error(), func(t *testing.T) {
			err := &Error{Op: OpRefresh, Kind: tt.kind, Reason: "test"}
			wrapped := fmt.Errorf("calling the hub: %w", err)
			for _, m := range moduleKinds {
				assert.Equal(t, m == tt.module, errors.Is(wrapped, m), "matches %v", m)
			}
			assert.Equal(t, tt.kind, KindOf(wrapped), "its own kind first")
			for _, other := range errorKinds {
				assert.Equal(t, other == tt.kind, errors.Is(wrapped, other), "matches %v", other)
			}
		})
	}
}
