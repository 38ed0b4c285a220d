package secretstore_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/testkit"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/driver"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

// limited is a driver with a limit per secret.
type limited struct {
	*testkit.Driver
	limit int
}

func (l limited) MaxValueBytes() int { return l.limit }

var _ driver.ValueLimiter = limited{}

// Put refuses data over the backend's limit (driver.ValueLimiter) with
// ErrInvalid naming the limit, before the driver is asked anything; a
// backend without a limit names none.
func TestPutRefusesDataOverTheLimit(t *testing.T) {
	d := testkit.NewDriver()
	s, err := secretstore.New(limited{Driver: d, limit: 10}, secretstore.Options{})
	require.NoError(t, err)
	assert.Equal(t, 10, s.MaxValueBytes())
	tests := []struct {
		name    string
		data    edgesecrets.Data
		wantErr string
	}{
		{"at the limit, keys counted", edgesecrets.Data{"k": []byte("123456789")}, ""},
		{"one byte over", edgesecrets.Data{"k": []byte("1234567890")}, "the secret's data is 11 bytes, over the store's limit of 10 bytes per secret"},
		{"over in sum", edgesecrets.Data{"a": []byte("1234"), "b": []byte("12345")}, "11 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			writes := d.Writes()
			_, err := s.Put(t.Context(), &secretstore.Secret{Name: "x", Data: tt.data}, secretstore.PutOptions{})
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, edgesecrets.ErrInvalid)
			assert.ErrorContains(t, err, tt.wantErr)
			assert.Equal(t, writes, d.Writes(), "nothing written")
		})
	}
	plain, err := secretstore.New(testkit.NewDriver(), secretstore.Options{})
	require.NoError(t, err)
	assert.Zero(t, plain.MaxValueBytes(), "a driver without a limit names none")
}

// The memory backend's limit is 1 MiB.
func TestMemoryLimit(t *testing.T) {
	s := memory.New()
	require.Equal(t, 1<<20, s.MaxValueBytes())
	_, err := s.Put(t.Context(), &secretstore.Secret{Name: "big", Data: edgesecrets.Data{"v": bytes.Repeat([]byte("x"), 5<<20)}}, secretstore.PutOptions{})
	require.ErrorIs(t, err, edgesecrets.ErrInvalid)
	assert.ErrorContains(t, err, "limit of 1048576 bytes")
	assert.NotContains(t, err.Error(), "xxxx", "the value is never in the error")
}
