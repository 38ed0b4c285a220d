package storetest

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/edgesecrets/edgesecrets/secretstore"
)

// The suite's name lists agree with secretstore.ValidateName: every
// invalid name is refused and every odd name accepted by the portable
// type, so the cases test the backend and not the lists.
func TestNameListsAgreeWithValidateName(t *testing.T) {
	for _, n := range invalidNames {
		assert.Error(t, secretstore.ValidateName(n), "invalidNames entry %q", n)
	}
	for _, n := range oddNames {
		assert.NoError(t, secretstore.ValidateName(n), "oddNames entry %q", n)
	}
}
