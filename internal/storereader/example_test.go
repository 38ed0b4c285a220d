package storereader_test

import (
	"context"
	"fmt"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/storereader"
	"github.com/edgesecrets/edgesecrets/mock"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// A Reader in front of a store turns many reads of few secrets into few
// backend reads. Here a mock store counts what reaches the backend.
func ExampleReader() {
	ctx := context.Background()
	backend := mock.NewStore(nil)
	for _, name := range []string{"db/password", "api/token"} {
		_, _ = backend.Inner.Put(ctx, &secretstore.Secret{Name: name, Data: edgesecrets.Data{"v": []byte("x")}}, secretstore.PutOptions{})
	}

	reader := storereader.New(backend.Store, storereader.Options{TTL: 30 * time.Second})
	for range 50 { // 50 agreements, each binding both secrets
		_, _ = reader.Get(ctx, "db/password")
		_, _ = reader.Get(ctx, "api/token")
	}
	fmt.Println("backend reads:", len(backend.Calls("get", "")))

	reader.Invalidate("api/token") // a watcher saw it change
	_, _ = reader.Get(ctx, "api/token")
	fmt.Println("backend reads:", len(backend.Calls("get", "")))
	// Output:
	// backend reads: 2
	// backend reads: 3
}
