package agbot

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/edgesecrets/edgesecrets/binding"
)

// A cancelled node waits for every candidate of the secrets that the
// revoked name is a candidate of, so that the one written deploys it.
func TestCandidatesOfACancellationsSecret(t *testing.T) {
	services := []binding.ServiceBinding{
		{Secrets: map[string]binding.BoundSecret{
			"key0": {StoreNames: []string{"org/node/n1/a", "org/a"}},
			"key1": {StoreNames: []string{"org/b"}},
		}},
		{Secrets: map[string]binding.BoundSecret{
			"other": {StoreNames: []string{"org/a"}},
		}},
	}
	for _, tc := range []struct {
		name, revoked string
		want          []string
	}{
		{"the organisation's, with a node-level candidate", "org/a", []string{"org/a", "org/node/n1/a"}},
		{"the node's, falling back to the organisation's", "org/node/n1/a", []string{"org/a", "org/node/n1/a"}},
		{"a binding of one name", "org/b", []string{"org/b"}},
		{"a name no longer bound", "org/gone", []string{"org/gone"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, candidatesOf(services, tc.revoked))
		})
	}
	assert.Equal(t, []string{"org/x"}, candidatesOf(nil, "org/x"), "no status: the name alone")
}
