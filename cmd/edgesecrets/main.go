// Command edgesecrets is the operator's tool for an edgesecrets hub: it asks
// a running agbot's operator API (package secretsapi's /admin routes) how
// delivery stands, and inspects a delivery state offline. It prints names,
// conditions, reason codes and sequences, never a secret value, a token or
// a checksum tag.
//
// Install it with
//
//	go install github.com/edgesecrets/edgesecrets/cmd/edgesecrets@latest
//
// Usage:
//
//	edgesecrets [global flags] <command> [flags]
//
// Commands:
//
//	health                       the agbot's GET /admin/health: store and state problems, counts
//	                             by condition and reason code
//	agreements [-condition C] [-reason R] [-limit N] [-after ID] [-all]
//	                             the agreements not in sync (or in condition C, or waiting for
//	                             reason R), a page at a time; -all follows the pages to the end
//	agreement <id>               one agreement's status: phase, slots, bindings, why it waits
//	release                      releases the cancellations the budget held; prints how many
//	state inspect -state <file | postgres://…> [-schema S] [-agreement ID]
//	                             offline inspection of a delivery state: counts, agreements with
//	                             their bindings' store names, content tags as present or absent,
//	                             sequences
//
// Global flags (before or after the command):
//
//	-agbot URL        the agbot's URL; default $EDGESECRETS_AGBOT_URL
//	-token-file FILE  a file holding the admin token; default: the token in
//	                  $EDGESECRETS_ADMIN_TOKEN (no flag takes the token itself)
//	-o table|json     output format (default table)
//	-timeout D        bound on the whole command (default 30s)
//
// Exit codes:
//
//	0  done; for health: healthy; for agreements: none listed (or -condition in_sync);
//	   for agreement: in sync
//	1  health: the agbot reports a store or state problem; agreements: agreements not
//	   in sync listed; agreement: not in sync
//	2  usage: a bad flag, command, condition, reason or missing token
//	3  the agbot or the state is unreachable or refused the request (a wrong token,
//	   a state file an agbot holds, a database down)
//	4  not found: no such agreement
//
// The state inspect command opens a state file with package boltstate,
// which has no read-only mode: it refuses a file a running agbot holds
// (bbolt's lock; exit 3: stop that agbot, or ask it with the API commands),
// never creates a missing file, and, like the agbot itself, brings an older
// file to the current schema and tightens its mode to 0600. A PostgreSQL
// state may be inspected while agbots share it; the URL is never printed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"
)

// Exit codes, documented in the package comment.
const (
	exitOK          = 0
	exitNotInSync   = 1
	exitUsage       = 2
	exitUnreachable = 3
	exitNotFound    = 4
)

// Environment variables the command reads.
const (
	envAgbotURL   = "EDGESECRETS_AGBOT_URL"
	envAdminToken = "EDGESECRETS_ADMIN_TOKEN"
)

// exitError is an error with the exit code it ends the command with.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// fail returns an exitError with code and a formatted message.
func fail(code int, format string, args ...any) error {
	return &exitError{code: code, err: fmt.Errorf(format, args...)}
}

// usageError is a usage problem (exit 2).
func usageError(format string, args ...any) error { return fail(exitUsage, format, args...) }

// env is what the command reads from its process: the environment and the
// output streams.
type env struct {
	getenv         func(string) string
	stdout, stderr io.Writer
}

// globals are the flags every command takes.
type globals struct {
	agbot     string
	tokenFile string
	output    string
	timeout   time.Duration
}

// register adds the global flags to fs, defaults from e.
func (g *globals) register(fs *flag.FlagSet, e env) {
	fs.StringVar(&g.agbot, "agbot", e.getenv(envAgbotURL), "the agbot's `URL` (default $"+envAgbotURL+")")
	fs.StringVar(&g.tokenFile, "token-file", "", "`file` holding the admin token (default: the token in $"+envAdminToken+")")
	fs.StringVar(&g.output, "o", "table", "output `format`: table or json")
	fs.DurationVar(&g.timeout, "timeout", 30*time.Second, "bound on the whole command")
}

// check reports a bad output format or timeout.
func (g *globals) check() error {
	switch {
	case g.output != "table" && g.output != "json":
		return usageError("-o %.20q: want table or json", g.output)
	case g.timeout <= 0:
		return usageError("-timeout must be positive")
	}
	return nil
}

const usageText = `Usage: edgesecrets [global flags] <command> [flags]

Commands:
  health                      the agbot's health (exit 1 when it reports a store or state problem)
  agreements [-condition C] [-reason R] [-limit N] [-after ID] [-all]
                              the agreements not in sync (exit 1 when any is listed)
  agreement <id>              one agreement's status (exit 1 when not in sync, 4 when unknown)
  release                     release the cancellations the budget held
  state inspect -state <file | postgres://...> [-schema S] [-agreement ID]
                              inspect a delivery state offline (never a value)

Global flags (before or after the command):
  -agbot URL        the agbot's URL (default $EDGESECRETS_AGBOT_URL)
  -token-file FILE  file holding the admin token (default: the token in $EDGESECRETS_ADMIN_TOKEN)
  -o table|json     output format (default table)
  -timeout D        bound on the whole command (default 30s)

Exit codes: 0 ok (health: healthy), 1 unhealthy or not in sync, 2 usage,
3 agbot or state unreachable or refusing, 4 not found.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], env{getenv: os.Getenv, stdout: os.Stdout, stderr: os.Stderr})
	stop()
	os.Exit(code)
}

// run runs the command line args and returns the exit code.
func run(ctx context.Context, args []string, e env) int {
	err := dispatch(ctx, args, e)
	if err == nil {
		return exitOK
	}
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	code := exitUnreachable
	var xe *exitError
	if errors.As(err, &xe) {
		code = xe.code
	}
	if code == exitNotInSync {
		return code // the output said so
	}
	_, _ = fmt.Fprintln(e.stderr, "edgesecrets: "+err.Error())
	if code == exitUsage {
		_, _ = fmt.Fprint(e.stderr, "Run 'edgesecrets -h' for usage.\n")
	}
	return code
}

// dispatch parses the global flags and runs the command.
func dispatch(ctx context.Context, args []string, e env) error {
	var g globals
	fs := flag.NewFlagSet("edgesecrets", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() { _, _ = fmt.Fprint(e.stderr, usageText) }
	g.register(fs, e)
	if err := fs.Parse(args); err != nil {
		return parseError(err)
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return usageError("no command given")
	}
	cmd, rest := fs.Arg(0), fs.Args()[1:]
	switch cmd {
	case "health":
		return cmdHealth(ctx, g, rest, e)
	case "agreements":
		return cmdAgreements(ctx, g, rest, e)
	case "agreement":
		return cmdAgreement(ctx, g, rest, e)
	case "release":
		return cmdRelease(ctx, g, rest, e)
	case "state":
		if len(rest) == 0 || rest[0] != "inspect" {
			return usageError("state: want 'state inspect -state <file | postgres://...>'")
		}
		return cmdStateInspect(ctx, g, rest[1:], e)
	case "help":
		fs.Usage()
		return nil
	}
	return usageError("unknown command %.40q (want health, agreements, agreement, release or state inspect)", cmd)
}

// parseError turns a flag package error into a usage error; -h is not
// one.
func parseError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	return &exitError{code: exitUsage, err: err}
}

// subcommand returns a flag set for a command, with the global flags
// registered again so that they may follow the command's name.
func subcommand(name, usage string, g *globals, e env) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	outer := *g
	g.register(fs, e)
	// The values given before the command are the defaults here.
	_ = fs.Set("agbot", outer.agbot)
	_ = fs.Set("token-file", outer.tokenFile)
	_ = fs.Set("o", outer.output)
	_ = fs.Set("timeout", outer.timeout.String())
	fs.Usage = func() {
		_, _ = fmt.Fprintf(e.stderr, "Usage: edgesecrets %s\n\nFlags:\n", usage)
		fs.PrintDefaults()
	}
	return fs
}
