package memory

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/driver"
	"github.com/edgesecrets/edgesecrets/secretstore/storetest"
)

type harness struct{ drivers []*store }

func (h *harness) MakeDriver(context.Context) (driver.Store, error) {
	d := newDriver()
	h.drivers = append(h.drivers, d)
	return d, nil
}

func (h *harness) BackendWrites() int64 {
	var n int64
	for _, d := range h.drivers {
		n += d.writes.Load()
	}
	return n
}

func (h *harness) Close() {}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(context.Context, *testing.T) (storetest.Harness, error) { return &harness{}, nil }, storetest.Options{})
}

func TestOpenFromConfig(t *testing.T) {
	ctx := t.Context()
	cfg, err := secretstore.ParseConfig(strings.NewReader(`{"type":"memory","defaultScope":"/org1/"}`))
	require.NoError(t, err)
	s, err := secretstore.Open(ctx, cfg, secretstore.OpenOptions{})
	require.NoError(t, err)
	_, err = s.Put(ctx, &secretstore.Secret{Name: "db", Data: edgesecrets.Data{"k": []byte("v")}}, secretstore.PutOptions{})
	require.NoError(t, err)
	names, err := s.List(ctx, "")
	require.NoError(t, err)
	assert.Equal(t, []string{"db"}, names, "names are relative to the scope")
	md, err := s.Stat(ctx, "db")
	require.NoError(t, err)
	assert.Equal(t, "db", md.Name)
	require.NoError(t, s.CheckCredentials(ctx), "a memory store has no credentials to reject")
}
