// Package testkit holds helpers shared by the tests of several packages in
// this module. It is not for use outside them.
package testkit

import (
	"context"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// Ops are the operations of secretstore.Store, by their secretstore.Error.Op names.
var Ops = []string{"get", "stat", "put", "delete", "list"}

// Call runs one operation of s by its Op name and returns its error. A Put
// writes {"k": "v-<name>"}; a List uses name as the prefix.
func Call(ctx context.Context, s *secretstore.Store, op, name string) error {
	var err error
	switch op {
	case "get":
		_, err = s.Get(ctx, name)
	case "stat":
		_, err = s.Stat(ctx, name)
	case "put":
		_, err = s.Put(ctx, &secretstore.Secret{Name: name, Data: edgesecrets.Data{"k": []byte("v-" + name)}}, secretstore.PutOptions{})
	case "delete":
		err = s.Delete(ctx, name)
	case "list":
		_, err = s.List(ctx, name)
	default:
		panic("testkit: unknown op " + op)
	}
	return err
}
