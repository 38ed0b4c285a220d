package memory_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

// The memory store keeps versions and labels, supports compare-and-set and
// counts its writes, which tests use to prove a write was skipped.
func ExampleNew() {
	ctx := context.Background()
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	store := memory.New(memory.WithClock(func() time.Time { return clock }))

	secret := &secretstore.Secret{Name: "db/password", Data: secretstore.Data{"password": []byte("s3cr3t")}}
	_, _ = store.Put(ctx, secret, secretstore.PutOptions{})
	changed, _ := store.Put(ctx, secret, secretstore.PutOptions{})
	fmt.Println("unchanged put changed:", changed, "writes:", store.Writes())

	md, _ := store.Stat(ctx, "db/password")
	fmt.Println("version:", md.Version, "updated:", md.UpdatedAt.Format(time.RFC3339))

	rotated := &secretstore.Secret{Name: "db/password", Data: secretstore.Data{"password": []byte("n3w")}}
	_, err := store.Put(ctx, rotated, secretstore.PutOptions{IfVersion: "7"})
	fmt.Println("stale compare-and-set:", errors.Is(err, secretstore.ErrConflict))
	changed, _ = store.Put(ctx, rotated, secretstore.PutOptions{IfVersion: md.Version})
	fmt.Println("current compare-and-set changed:", changed)

	_, _ = store.Put(ctx, &secretstore.Secret{Name: "db/user", Data: secretstore.Data{"user": []byte("app")}}, secretstore.PutOptions{})
	names, _ := store.List(ctx, "db/")
	fmt.Println(names)
	// Output:
	// unchanged put changed: false writes: 1
	// version: 1 updated: 2026-01-01T00:00:00Z
	// stale compare-and-set: true
	// current compare-and-set changed: true
	// [db/password db/user]
}
