// Command quickstart runs the whole edgesecrets flow in one process, and
// narrates each step (names, never values):
//
//  1. an admin writes secrets to the hub's secret store;
//  2. a deployer's secret binding is validated through the agbot's
//     existence API, and a broken one shows the full report;
//  3. the agent registers an identity certificate carrying its agreement
//     keys; the agbot verifies it and seals a proposal to those keys;
//  4. the agent opens the proposal and writes the service's files, which the
//     service reads from its mount and through the /secrets API;
//  5. the admin rotates a secret: the watcher, the tracker and the outbox
//     deliver a sealed update, and the service fetches and acknowledges it
//     (also when the rotation comes before the watcher's first look: the
//     tracker knows which version the proposal carried);
//  6. the admin deletes the secret: the tracker's cancel hook ends the
//     agreement and the agent wipes the service's files.
//
// Usage:
//
//	go run ./examples/quickstart                     # in-memory store
//	go run ./examples/quickstart -store store.json   # any registered backend
//	go run ./examples/quickstart -v                  # and every debug log line on stderr
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

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process exit, returning the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("quickstart", flag.ContinueOnError)
	fs.SetOutput(stderr)
	storePath := fs.String("store", "", "`file` holding a JSON store config, e.g.\n"+
		`{"type": "awssm", "defaultScope": "openhorizon", "awssm": {"region": "eu-west-1"}}`+"\n"+
		"(default: "+DefaultStoreConfig+")")
	verbose := fs.Bool("v", false, "also write every component's debug log to stderr (names, never values)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: quickstart [-store file] [-v]\n\n"+
			"Runs the whole edgesecrets flow in one process: admin, deployer, agbot,\n"+
			"agent and service. Store types: %v.\n\n", registeredBackends())
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "quickstart: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}

	opts := Options{Out: stdout}
	if *storePath != "" {
		b, err := os.ReadFile(*storePath)
		if err != nil {
			fmt.Fprintf(stderr, "quickstart: reading the store config: %v\n", err)
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
		fmt.Fprintf(stderr, "quickstart: FAILED: %v\n", err)
		return 1
	}
	return 0
}
