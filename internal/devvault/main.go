// Command devvault is the HashiCorp Vault server command, built from source
// through the Go module proxy so the project's tests can start a real
// `vault server -dev` without downloading a prebuilt binary.
//
// It lives in its own module so the library's go.mod stays small. Build it
// with scripts/devvault.sh, which caches the binary by the hash of go.sum.
package main

import (
	"os"

	"github.com/hashicorp/vault/command"
)

func main() {
	os.Exit(command.Run(os.Args[1:]))
}
