package memory_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
	"github.com/edgesecrets/edgesecrets/secretstore/storetest"
)

type harness struct{ stores []*memory.Store }

func (h *harness) MakeStore(context.Context) (secretstore.Store, error) {
	s := memory.New(memory.WithScope("conformance"))
	h.stores = append(h.stores, s)
	return s, nil
}

func (h *harness) BackendWrites() int64 {
	var n int64
	for _, s := range h.stores {
		n += s.Writes()
	}
	return n
}

func (h *harness) Close() {}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(context.Context, *testing.T) (storetest.Harness, error) { return &harness{}, nil }, storetest.Options{})
}

func TestClosedStoreIsUnavailable(t *testing.T) {
	ctx := t.Context()
	s := memory.New()
	_, err := s.Put(ctx, &secretstore.Secret{Name: "a", Data: secretstore.Data{"k": []byte("v")}}, secretstore.PutOptions{})
	require.NoError(t, err)
	require.NoError(t, s.CheckCredentials(ctx), "a memory store has no credentials to reject")
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close is idempotent")

	assert.ErrorIs(t, secretstore.CheckCredentials(ctx, s), secretstore.ErrUnavailable, "a closed store cannot tell")

	_, err = s.Get(ctx, "a")
	assert.ErrorIs(t, err, secretstore.ErrUnavailable)
	_, err = s.Stat(ctx, "a")
	assert.ErrorIs(t, err, secretstore.ErrUnavailable)
	_, err = s.Put(ctx, &secretstore.Secret{Name: "a"}, secretstore.PutOptions{})
	assert.ErrorIs(t, err, secretstore.ErrUnavailable)
	assert.ErrorIs(t, s.Delete(ctx, "a"), secretstore.ErrUnavailable)
	_, err = s.List(ctx, "")
	assert.ErrorIs(t, err, secretstore.ErrUnavailable)
}

func TestOpenFromConfig(t *testing.T) {
	ctx := t.Context()
	cfg, err := secretstore.ParseConfig(strings.NewReader(`{"type":"memory","defaultScope":"/org1/"}`))
	require.NoError(t, err)
	s, err := secretstore.Open(ctx, cfg)
	require.NoError(t, err)
	_, err = s.Put(ctx, &secretstore.Secret{Name: "db", Data: secretstore.Data{"k": []byte("v")}}, secretstore.PutOptions{})
	require.NoError(t, err)
	names, err := s.List(ctx, "")
	require.NoError(t, err)
	assert.Equal(t, []string{"db"}, names, "names are relative to the scope")
	md, err := s.Stat(ctx, "db")
	require.NoError(t, err)
	assert.Equal(t, "db", md.Name)
}

func TestWithScopePanicsOnInvalidScope(t *testing.T) {
	assert.PanicsWithValue(t, `memory: scope "a/../b": name has a ".." path segment`, func() { memory.WithScope("a/../b") })
}
