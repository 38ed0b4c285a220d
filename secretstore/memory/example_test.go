package memory_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

// The memory store keeps versions and labels and supports compare-and-set.
func ExampleNew() {
	ctx := context.Background()
	store := memory.New()

	secret := &secretstore.Secret{Name: "db/password", Data: edgesecrets.Data{"password": []byte("s3cr3t")}}
	_, _ = store.Put(ctx, secret, secretstore.PutOptions{})
	changed, _ := store.Put(ctx, secret, secretstore.PutOptions{})
	fmt.Println("unchanged put changed:", changed)

	md, _ := store.Stat(ctx, "db/password")
	fmt.Println("version:", md.Version)

	rotated := &secretstore.Secret{Name: "db/password", Data: edgesecrets.Data{"password": []byte("n3w")}}
	_, err := store.Put(ctx, rotated, secretstore.PutOptions{IfVersion: "7"})
	fmt.Println("stale compare-and-set:", errors.Is(err, edgesecrets.ErrConflict))
	changed, _ = store.Put(ctx, rotated, secretstore.PutOptions{IfVersion: md.Version})
	fmt.Println("current compare-and-set changed:", changed)

	_, _ = store.Put(ctx, &secretstore.Secret{Name: "db/user", Data: edgesecrets.Data{"user": []byte("app")}}, secretstore.PutOptions{})
	names, _ := store.List(ctx, "db/")
	fmt.Println(names)
	// Output:
	// unchanged put changed: false
	// version: 1
	// stale compare-and-set: true
	// current compare-and-set changed: true
	// [db/password db/user]
}
