package boltstate_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/boltstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/binding"
)

// An agbot opens its state file at start and gives it to the delivery
// engine; after a restart (or kill -9) it finds its agreements again.
func Example() {
	dir, _ := os.MkdirTemp("", "agbot")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "delivery.db")
	ctx := context.Background()

	st, _, err := boltstate.Open(path, boltstate.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	rec := &state.Record{
		ID: "agr-1", Node: "org/node-1", Phase: state.PhaseActive,
		Services: []binding.ServiceBinding{{Secrets: map[string]binding.BoundSecret{
			"db-password": {StoreNames: []string{"openhorizon/org/node/node-1/db", "openhorizon/org/db"}},
		}}},
		NextAttempt: time.Now(),
	}
	_ = st.Create(ctx, rec)
	_ = st.Close()

	st, _, _ = boltstate.Open(path, boltstate.Options{})
	defer st.Close()
	names, _ := st.Names(ctx, "")
	due, _ := st.Due(ctx, "", time.Now(), time.Minute, 10)
	fmt.Println("names:", names)
	fmt.Println("due:", len(due), due[0].ID, "revision", due[0].Revision)
	// Output:
	// names: [openhorizon/org/db openhorizon/org/node/node-1/db]
	// due: 1 agr-1 revision 2
}
