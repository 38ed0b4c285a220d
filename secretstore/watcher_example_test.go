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
	show := func(events []secretstore.Event) {
		for _, e := range events {
			fmt.Println(e.Kind, e.Name, e.Initial)
		}
	}

	// A program runs the loop: go w.Run(ctx, handle). Here, cycle by cycle:
	show(w.Poll(ctx))
	write("rotated")
	show(w.Poll(ctx))
	show(w.Poll(ctx)) // nothing changed: no events
	// Output:
	// deleted api/token true
	// appeared db/password true
	// changed db/password false
}
