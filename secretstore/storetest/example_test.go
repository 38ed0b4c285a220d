package storetest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/testkit"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/driver"
	"github.com/edgesecrets/edgesecrets/secretstore/storetest"
)

// harness runs the suite on a map-backed test driver. A real backend's
// harness makes each driver over a fresh mount or name prefix and counts
// the write requests its client sends.
type harness struct{ drivers []*testkit.Driver }

func (h *harness) MakeDriver(context.Context) (driver.Store, error) {
	d := testkit.NewDriver()
	h.drivers = append(h.drivers, d)
	return testkit.Batching(d), nil
}

func (h *harness) BackendWrites() int64 {
	var n int64
	for _, d := range h.drivers {
		n += d.Writes()
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
	drv, _ := h.MakeDriver(ctx)
	store, _ := secretstore.New(drv, secretstore.Options{})
	s := &secretstore.Secret{Name: "db/password", Data: edgesecrets.Data{"password": []byte("x")}}
	_, _ = store.Put(ctx, s, secretstore.PutOptions{})
	_, _ = store.Put(ctx, s, secretstore.PutOptions{})
	fmt.Println("backend writes:", h.BackendWrites())
	// Output: backend writes: 1
}
