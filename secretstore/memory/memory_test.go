package memory_test

import (
	"context"
	"testing"

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
