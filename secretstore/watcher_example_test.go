package secretstore_test

import (
	"context"
	"fmt"

	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

func ExampleWatcher() {
	ctx := context.Background()
	store := memory.New()
	write := func(value string) {
		_, err := store.Put(ctx, &secretstore.Secret{Name: "db/password", Data: secretstore.Data{"password": []byte(value)}}, secretstore.PutOptions{})
		if err != nil {
			panic(err)
		}
	}
	write("first")

	cfg, err := secretstore.NewWatcherConfig("30s") // from the agbot's configuration
	if err != nil {
		panic(err)
	}
	w, err := secretstore.NewWatcher(store, secretstore.WatcherOptions{Config: cfg})
	if err != nil {
		panic(err)
	}
	if err := w.Watch("db/password", "api/token"); err != nil {
		panic(err)
	}
	show := func(c secretstore.Cycle) {
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
