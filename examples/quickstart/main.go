// Command quickstart runs the whole edgesecrets flow in one process, and
// narrates each step (names, never values):
//
//  1. an admin writes secrets to the hub's secret store;
//  2. a deployer's secret binding is validated through the agbot's
//     existence API, and a broken one shows the full report;
//  3. the agent registers an identity certificate carrying its agreement
//     keys; the agbot registers the agreement with its delivery engine,
//     which verifies the certificate and seals a proposal to those keys;
//  4. the agent opens the proposal and writes the service's files, which the
//     service reads from its mount and through the /secrets API;
//  5. the admin rotates a secret: the engine's watcher sees the new content,
//     the engine seals an update and sends it until the agent acknowledges
//     it, and the service fetches and acknowledges it in turn;
//  6. the admin deletes the secret: the engine decides the cancellation (its
//     cancel hook is called), sends it until the agent acknowledges it, and
//     the agent wipes the service's files.
//
// The engine keeps what each agent was sent and acknowledged (store names
// and content tags, never values) in a state file (agbot-state.db) in the
// run's temporary directory.
//
// Usage:
//
//	go run ./examples/quickstart                     # in-memory store
//	go run ./examples/quickstart -store store.json   # any registered backend
//	go run ./examples/quickstart -v                  # and every debug log line on stderr
//
// A store.json for a local `vault server -dev` (KV v2 at "secret"), with
// VAULT_TOKEN set to its root token:
//
//	{"type": "vault", "defaultScope": "openhorizon", "vault": {
//	  "address": "http://127.0.0.1:8200", "mount": "secret",
//	  "auth": {"method": "token", "tokenEnv": "VAULT_TOKEN"}}}
//
// The run writes its secrets under secret/openhorizon/myorg/ and deletes
// them before it exits. The -h output shows a config for each backend.
//
// It exits with status 0 when every step did what it should, and 1 with a
// message naming the failed step otherwise.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"time"
)

// runTimeout bounds a whole run; each wait inside has its own, shorter limit.
const runTimeout = 60 * time.Second

// Store configs the usage shows, besides DefaultStoreConfig.
const (
	// awssmStoreConfigExample uses AWS Secrets Manager with the SDK's
	// default credential chain.
	awssmStoreConfigExample = `{"type": "awssm", "defaultScope": "openhorizon", "awssm": {"region": "eu-west-1"}}`
	// vaultStoreConfigExample uses a local `vault server -dev`: KV v2 at
	// "secret", token auth with the token read from VAULT_TOKEN (a config
	// file should not hold it).
	vaultStoreConfigExample = `{"type": "vault", "defaultScope": "openhorizon", "vault": {` +
		`"address": "http://127.0.0.1:8200", "mount": "secret", "auth": {"method": "token", "tokenEnv": "VAULT_TOKEN"}}}`
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process exit, returning the exit status. Its
// messages on stderr are not checked: a failed write there has nowhere
// else to go, and the exit status tells what happened.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("quickstart", flag.ContinueOnError)
	fs.SetOutput(stderr)
	storePath := fs.String("store", "", "`file` holding a JSON store config, see below\n(default: "+DefaultStoreConfig+")")
	verbose := fs.Bool("v", false, "also write every component's debug log to stderr (names, never values)")
	fs.Usage = func() {
		_, _ = fmt.Fprintf(fs.Output(), "Usage: quickstart [-store file] [-v]\n\n"+
			"Runs the whole edgesecrets flow in one process: admin, deployer, agbot,\n"+
			"agent and service. Store types: %v.\n\n", registeredBackends())
		fs.PrintDefaults()
		_, _ = fmt.Fprintf(fs.Output(), "\nStore configs, one per backend:\n"+
			"  memory: %s\n  awssm:  %s\n  vault:  %s\n"+
			"          (a local `vault server -dev`, VAULT_TOKEN set to its root token;\n"+
			"          the run writes under secret/openhorizon/myorg/ and deletes what it wrote)\n",
			DefaultStoreConfig, awssmStoreConfigExample, vaultStoreConfigExample)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		_, _ = fmt.Fprintf(stderr, "quickstart: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}

	opts := Options{Out: stdout}
	if *storePath != "" {
		b, err := os.ReadFile(*storePath)
		if err != nil {
			_, _ = fmt.Fprintf(stderr, "quickstart: reading the store config: %v\n", err)
			return 1
		}
		opts.StoreConfig = string(b)
	}
	if *verbose {
		opts.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	if err := Run(ctx, opts); err != nil {
		_, _ = fmt.Fprintf(stderr, "quickstart: FAILED: %v\n", err)
		return 1
	}
	return 0
}
