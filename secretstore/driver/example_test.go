package driver_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/driver"
)

// mapStore is a driver over a map: what a backend author writes. It keeps
// no rules the portable type keeps for it (names, copies, unchanged
// writes, closed stores), only its own: versions and an atomic
// compare-and-set.
type mapStore struct {
	mu      sync.Mutex
	secrets map[string]*driver.Secret
	version int
}

var errMissing = &secretstore.Error{Kind: edgesecrets.ErrNotFound}

func (m *mapStore) Get(_ context.Context, name string) (*driver.Secret, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.secrets[name]; ok {
		return s, nil
	}
	return nil, errMissing
}

func (m *mapStore) Stat(ctx context.Context, name string) (*driver.Secret, error) {
	return m.Get(ctx, name)
}

func (m *mapStore) Put(_ context.Context, w *driver.Write) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, exists := m.secrets[w.Name]
	if w.CreateOnly && exists || w.IfVersion != "" && (!exists || cur.Version != w.IfVersion) {
		return &secretstore.Error{Kind: edgesecrets.ErrConflict, Err: errors.New("the secret changed")}
	}
	m.version++
	m.secrets[w.Name] = &driver.Secret{Data: w.Data, Labels: w.Labels, Version: strconv.Itoa(m.version)}
	return nil
}

func (m *mapStore) Delete(_ context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.secrets, name)
	return nil
}

func (m *mapStore) List(_ context.Context, prefix string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var names []string
	for n := range m.secrets {
		if strings.HasPrefix(n, prefix) {
			names = append(names, n)
		}
	}
	return names, nil
}

func (m *mapStore) Close() error { return nil }

// A backend's constructor wraps its driver in the portable store, which
// enforces the shared rules: here an invalid name never reaches the
// driver, and a Put that changes nothing writes nothing.
func Example() {
	ctx := context.Background()
	d := &mapStore{secrets: map[string]*driver.Secret{}}
	store, err := secretstore.New(d, secretstore.Options{Scope: "org1"})
	if err != nil {
		panic(err)
	}
	s := &secretstore.Secret{Name: "db/password", Data: edgesecrets.Data{"password": []byte("s3cr3t")}}
	changed, _ := store.Put(ctx, s, secretstore.PutOptions{})
	fmt.Println("changed:", changed, "version:", d.version)
	changed, _ = store.Put(ctx, s, secretstore.PutOptions{})
	fmt.Println("changed:", changed, "version:", d.version)

	names, _ := store.List(ctx, "")
	fmt.Println("names:", names, "driver's:", len(d.secrets), "under org1/:", d.secrets["org1/db/password"] != nil)

	_, err = store.Get(ctx, "../org2/db")
	fmt.Println(err)
	_, err = store.Get(ctx, "db/missing")
	fmt.Println(err)
	// Output:
	// changed: true version: 1
	// changed: false version: 1
	// names: [db/password] driver's: 1 under org1/: true
	// secretstore: get "../org2/db": invalid: name has a ".." path segment
	// secretstore: get "db/missing": not found
}
