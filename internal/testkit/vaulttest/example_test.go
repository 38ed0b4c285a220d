package vaulttest_test

import (
	"context"
	"fmt"
	"os"

	"github.com/edgesecrets/edgesecrets/internal/testkit/vaulttest"
)

// Outside a test (a program's integration harness, say), StartServer runs
// a dev server that the caller stops. Tests use Start or Shared instead.
func ExampleStartServer() {
	bin := os.Getenv(vaulttest.EnvBinary)
	if bin == "" {
		fmt.Println("no Vault binary:", vaulttest.HowToGetBinary)
		return
	}
	dir, err := os.MkdirTemp("", "vault-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	srv, err := vaulttest.StartServer(context.Background(), bin, dir, vaulttest.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Stop()
	c, err := srv.NewClient()
	if err != nil {
		fmt.Println(err)
		return
	}
	h, err := c.Sys().Health()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("sealed:", h.Sealed)
}
