package agreement

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestErrorKinds pins which exported kind each cause matches: callers
// branch on the kinds only, so moving a cause to another kind changes what
// they do.
func TestErrorKinds(t *testing.T) {
	kinds := []error{ErrInvalid, ErrNotAuthentic, ErrReplay}
	for _, tc := range []struct {
		cause *cause
		kind  error
	}{
		{errTooLarge, ErrInvalid},
		{errMalformed, ErrInvalid},
		{errUnsupportedVersion, ErrInvalid},
		{errUnexpectedType, ErrInvalid},
		{errInvalidMessage, ErrInvalid},
		{errInvalidKey, ErrInvalid},
		{errUnknownSuite, ErrInvalid},
		{errInsecureKeyFile, ErrInvalid},
		{errSuiteNotAllowed, ErrNotAuthentic},
		{errWrongRecipient, ErrNotAuthentic},
		{errWrongSender, ErrNotAuthentic},
		{errBadSignature, ErrNotAuthentic},
		{errDecrypt, ErrNotAuthentic},
	} {
		t.Run(tc.cause.text, func(t *testing.T) {
			err := fmt.Errorf("agreement: open: %w: detail", tc.cause)
			for _, k := range kinds {
				assert.Equal(t, k == tc.kind, errors.Is(err, k), "matches %q", k)
			}
			assert.Equal(t, "agreement: open: "+tc.cause.text+": detail", err.Error(), "the cause's words stay in the text")
		})
	}
}
