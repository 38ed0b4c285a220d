package testkit

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/edgesecrets/edgesecrets/secretstore"
)

// StoreSnapshot returns every secret of a store, name → its keys and
// values, for a test that a request changed nothing (or exactly one name).
func StoreSnapshot(t testing.TB, store *secretstore.Store) map[string]string {
	t.Helper()
	names, err := store.List(context.Background(), "")
	if err != nil {
		t.Fatalf("listing the store: %v", err)
	}
	out := map[string]string{}
	for _, n := range names {
		s, err := store.Get(context.Background(), n)
		if err != nil {
			t.Fatalf("reading %q: %v", n, err)
		}
		var b strings.Builder
		for _, k := range slices.Sorted(maps.Keys(s.Data)) {
			fmt.Fprintf(&b, "%q=%q ", k, s.Data[k])
		}
		out[n] = b.String()
	}
	return out
}
