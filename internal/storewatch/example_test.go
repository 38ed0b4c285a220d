package storewatch_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/storewatch"
	"github.com/edgesecrets/edgesecrets/mock"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

func ExampleWatcher() {
	ctx := context.Background()
	store := memory.New()
	write := func(value string) {
		_, err := store.Put(ctx, &secretstore.Secret{Name: "db/password", Data: edgesecrets.Data{"password": []byte(value)}}, secretstore.PutOptions{})
		if err != nil {
			panic(err)
		}
	}
	write("first")

	w, err := storewatch.New(store, storewatch.Options{Interval: 30 * time.Second})
	if err != nil {
		panic(err)
	}
	if err := w.Watch("db/password", "api/token"); err != nil {
		panic(err)
	}
	show := func(c storewatch.Cycle) {
		for _, e := range c.Events {
			fmt.Println(e.Kind, e.Name, e.Initial)
		}
		fmt.Printf("%d watched, %d answered, credentials checked %t, store failure: %v\n",
			c.Watched, c.Answered, c.CredentialsChecked, c.StoreFailure())
	}

	// A program runs the loop: go w.Run(ctx, handle). Here, cycle by cycle:
	show(w.Poll(ctx))
	write("rotated")
	show(w.Poll(ctx))
	show(w.Poll(ctx)) // nothing changed: no events
	// Output:
	// deleted api/token true
	// appeared db/password true
	// 2 watched, 2 answered, credentials checked true, store failure: <nil>
	// changed db/password false
	// 2 watched, 2 answered, credentials checked true, store failure: <nil>
	// 2 watched, 2 answered, credentials checked true, store failure: <nil>
}

// A caller deciding whether a refused secret was revoked asks the cycle
// first: when the store rejects the caller's own credentials (here
// simulated with mock.Store), every name is refused and StoreFailure says
// so; one secret refused among answered ones, with the credentials
// accepted, is about that secret alone.
func ExampleCycle_StoreFailure() {
	ctx := context.Background()
	backend := mock.NewStore(nil) // over a memory store, which has a credential check
	for _, name := range []string{"db/password", "api/token", "tls/key"} {
		_, _ = backend.Put(ctx, &secretstore.Secret{Name: name, Data: edgesecrets.Data{"v": []byte("x")}}, secretstore.PutOptions{})
	}
	w, err := storewatch.New(backend.Store, storewatch.Options{})
	if err != nil {
		panic(err)
	}
	_ = w.Watch("db/password", "api/token", "tls/key")
	w.Poll(ctx) // the baseline

	show := func(c storewatch.Cycle) {
		fmt.Printf("answered %d, forbidden %d, credentials %v\n", c.Answered, c.Forbidden, c.Credentials)
		if err := c.StoreFailure(); err != nil {
			fmt.Println("store failure: hold every revocation:", errors.Is(err, edgesecrets.ErrPermission))
			return
		}
		for _, e := range c.Events {
			fmt.Println(e.Kind, e.Name, "(a revocation to confirm)")
		}
	}

	// The agbot's credentials are rejected: every call is refused.
	backend.SetFaults(mock.Faults{Fail: edgesecrets.ErrPermission, Times: 4})
	show(w.Poll(ctx))
	// Back to normal: the names reappear.
	w.Poll(ctx)
	// One secret's permission removed.
	backend.SetFaults(mock.Faults{Hook: func(_ context.Context, c mock.Call) error {
		if c.Name == "api/token" {
			return &secretstore.Error{Op: c.Op, Name: c.Name, Kind: edgesecrets.ErrPermission}
		}
		return nil
	}})
	show(w.Poll(ctx))
	// Output:
	// answered 0, forbidden 3, credentials secretstore: check-credentials: permission denied: mock: injected fault
	// store failure: hold every revocation: true
	// answered 2, forbidden 1, credentials <nil>
	// forbidden api/token (a revocation to confirm)
}
