package storetest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
	"github.com/edgesecrets/edgesecrets/secretstore/storetest"
)

// harness runs the suite on the memory backend. A real backend's harness
// would make each store over a fresh mount or name prefix and count the
// write requests its client sends.
type harness struct{ stores []*memory.Store }

func (h *harness) MakeStore(context.Context) (secretstore.Store, error) {
	s := memory.New()
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

func newHarness(context.Context, *testing.T) (storetest.Harness, error) { return &harness{}, nil }

// A backend's test file runs the suite with its harness:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, newHarness, storetest.Options{})
//	}
//
// The harness's write counter is what lets the suite prove that an
// unchanged Put issues no backend write.
func Example() {
	ctx := context.Background()
	h, _ := newHarness(ctx, nil)
	store, _ := h.MakeStore(ctx)
	s := &secretstore.Secret{Name: "db/password", Data: secretstore.Data{"password": []byte("x")}}
	_, _ = store.Put(ctx, s, secretstore.PutOptions{})
	_, _ = store.Put(ctx, s, secretstore.PutOptions{})
	fmt.Println("backend writes:", h.BackendWrites())
	// Output: backend writes: 1
}
