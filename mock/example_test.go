package mock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/mock"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// readWithRetry is the code under test: it retries a read once when the
// store is unavailable.
func readWithRetry(ctx context.Context, store *secretstore.Store, name string) (*secretstore.Secret, error) {
	s, err := store.Get(ctx, name)
	if errors.Is(err, edgesecrets.ErrUnavailable) {
		s, err = store.Get(ctx, name)
	}
	return s, err
}

// A unit test makes the first read fail as if Vault were sealed, then checks
// that the code retried exactly once.
func ExampleStore() {
	ctx := context.Background()
	store := mock.NewStore(nil) // an in-memory store underneath
	_, _ = store.Inner.Put(ctx, &secretstore.Secret{
		Name: "db/password",
		Data: edgesecrets.Data{"password": []byte("s3cr3t")},
	}, secretstore.PutOptions{})

	store.SetFaults(mock.Faults{Op: "get", Fail: edgesecrets.ErrUnavailable, Times: 1})
	s, err := readWithRetry(ctx, store.Store, "db/password")

	fmt.Println("error:", err)
	fmt.Println("secret:", s.Name, s.Data)
	fmt.Println("backend reads:", len(store.Calls("get", "")))

	store.SetFaults(mock.Faults{Fail: edgesecrets.ErrUnavailable}) // the store is down
	_, err = readWithRetry(ctx, store.Store, "db/password")
	fmt.Println("error:", err)
	// Output:
	// error: <nil>
	// secret: db/password map[password:[redacted]]
	// backend reads: 2
	// error: secretstore: get "db/password": unavailable: mock: injected fault
}
