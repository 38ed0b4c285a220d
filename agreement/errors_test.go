package agreement

import (
	"errors"
	"fmt"
	"testing"

	"github.com/edgesecrets/edgesecrets"
	"github.com/stretchr/testify/assert"
)

// TestErrorKinds pins which exported kind each cause matches: callers
// branch on the kinds only, so moving a cause to another kind changes what
// they do.
func TestErrorKinds(t *testing.T) {
	kinds := []error{edgesecrets.ErrInvalid, ErrNotAuthentic, ErrReplay}
	refinements := []error{ErrSuiteNotAllowed, ErrWrongRecipient, ErrWrongSender, ErrBadSignature, ErrDecrypt}
	for _, tc := range []struct {
		cause error
		kind  error
	}{
		{errTooLarge, edgesecrets.ErrInvalid},
		{errMalformed, edgesecrets.ErrInvalid},
		{errUnsupportedVersion, edgesecrets.ErrInvalid},
		{errUnexpectedType, edgesecrets.ErrInvalid},
		{errInvalidMessage, edgesecrets.ErrInvalid},
		{errInvalidKey, edgesecrets.ErrInvalid},
		{errUnknownSuite, edgesecrets.ErrInvalid},
		{errInsecureKeyFile, edgesecrets.ErrInvalid},
		{ErrSuiteNotAllowed, ErrNotAuthentic},
		{ErrWrongRecipient, ErrNotAuthentic},
		{ErrWrongSender, ErrNotAuthentic},
		{ErrBadSignature, ErrNotAuthentic},
		{ErrDecrypt, ErrNotAuthentic},
	} {
		t.Run(tc.cause.Error(), func(t *testing.T) {
			err := fmt.Errorf("agreement: open: %w: detail", tc.cause)
			for _, k := range kinds {
				assert.Equal(t, k == tc.kind, errors.Is(err, k), "matches %q", k) //nolint:errorlint // compares the table's values, not an error chain
			}
			for _, r := range refinements {
				assert.Equal(t, r == tc.cause, errors.Is(err, r), "matches the refinement %q only if it is that one", r) //nolint:errorlint // compares the table's values, not an error chain
			}
			assert.Equal(t, "agreement: open: "+tc.cause.Error()+": detail", err.Error(), "the cause's words stay in the text")
		})
	}
}
