// Package testkit holds helpers shared by the tests of several packages in
// this module. It is not for use outside them.
package testkit

import (
	"context"

	"github.com/edgesecrets/edgesecrets/secretstore"
)

// Ops are the operations of secretstore.Store, as Op constants.
var Ops = []string{secretstore.OpGet, secretstore.OpStat, secretstore.OpPut, secretstore.OpDelete, secretstore.OpList}

// Call runs one operation of s by its Op name and returns its error. A Put
// writes {"k": "v-<name>"}; a List uses name as the prefix.
func Call(ctx context.Context, s *secretstore.Store, op, name string) error {
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
