// Package testkit holds helpers shared by the tests of several packages in
// this module. It is not for use outside them.
package testkit

import (
	"context"
	"sync/atomic"

	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

// Ops are the operations of the Store interface, as Op constants.
var Ops = []string{secretstore.OpGet, secretstore.OpStat, secretstore.OpPut, secretstore.OpDelete, secretstore.OpList}

// Call runs one operation of s by its Op name and returns its error. A Put
// writes {"k": "v-<name>"}; a List uses name as the prefix.
func Call(ctx context.Context, s secretstore.Store, op, name string) error {
	var err error
	switch op {
	case secretstore.OpGet:
		_, err = s.Get(ctx, name)
	case secretstore.OpStat:
		_, err = s.Stat(ctx, name)
	case secretstore.OpPut:
		_, err = s.Put(ctx, &secretstore.Secret{Name: name, Data: secretstore.Data{"k": []byte("v-" + name)}}, secretstore.PutOptions{})
	case secretstore.OpDelete:
		err = s.Delete(ctx, name)
	case secretstore.OpList:
		_, err = s.List(ctx, name)
	default:
		panic("testkit: unknown op " + op)
	}
	return err
}

// BatchStore is a memory store that also reads batches in one call, as the
// AWS backend does, and counts those calls.
type BatchStore struct {
	*memory.Store
	batches atomic.Int64
}

// NewBatchStore returns an empty BatchStore.
func NewBatchStore() *BatchStore { return &BatchStore{Store: memory.New()} }

// Batches returns how many GetBatch calls the store has served.
func (b *BatchStore) Batches() int64 { return b.batches.Load() }

// GetBatch implements secretstore.BatchGetter.
func (b *BatchStore) GetBatch(ctx context.Context, names []string) (map[string]*secretstore.Secret, error) {
	b.batches.Add(1)
	out := map[string]*secretstore.Secret{}
	for _, n := range names {
		s, err := b.Get(ctx, n)
		switch {
		case err == nil:
			out[n] = s
		case secretstore.KindOf(err) != secretstore.ErrNotFound:
			return nil, err
		}
	}
	return out, nil
}
