package awssm_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/awssm"
)

// The store names AWS's limit on a secret value, 65536 bytes of
// SecretString, and a Put over it is refused before anything is sent.
func TestMaxValueBytes(t *testing.T) {
	e := newEnv(t)
	s := e.store(awssm.Options{})
	require.Equal(t, 65536, s.MaxValueBytes())
	writes := e.srv.Writes()
	_, err := s.Put(t.Context(), &secretstore.Secret{Name: "big", Data: d("v", strings.Repeat("x", 65536))}, secretstore.PutOptions{})
	require.ErrorIs(t, err, edgesecrets.ErrInvalid)
	assert.ErrorContains(t, err, "limit of 65536 bytes")
	assert.Equal(t, writes, e.srv.Writes(), "nothing sent")
}
