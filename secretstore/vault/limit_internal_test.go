package vault

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/edgesecrets/edgesecrets/secretstore/driver"
)

// The driver names Vault's default max_request_size, 32 MiB, as its
// limit per secret.
func TestMaxValueBytes(t *testing.T) {
	var d driver.ValueLimiter = &store{}
	assert.Equal(t, 32<<20, d.MaxValueBytes())
}
