// Package demo holds the little wiring the example programs (agbot, agent,
// service) share: logging, a hardened loopback HTTP server that publishes
// its URL (Limits: timeouts, size limits, a connection bound), token files, the demo attestation, the environment file an agent hands a
// service, and envelope sequence numbers. Everything else they do is the
// library's.
//
// It is for the examples only. Where it stands in for something a real
// deployment has (a provider's attestation, a container's environment), the
// doc comment says so.
package demo

import (
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/natefinch/atomic"
)

// NewLogger returns a text logger writing to w at level ("debug", "info",
// "warn" or "error").
func NewLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("listen address %q: the examples serve plain HTTP, so only loopback addresses are allowed", addr)
	}
	return nil
}

// ReadToken reads a token file: one line, surrounding white space ignored.
func ReadToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	if len(b) > 4<<10 {
		return "", fmt.Errorf("token file %s: longer than 4 KiB", path)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("token file %s: want one token on one line", path)
	}
	return tok, nil
}

// ReadOrCreateToken reads the token file at path, or when there is none
// creates it (mode 0600) with a new random token.
func ReadOrCreateToken(path string) (string, error) {
	tok, err := ReadToken(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return tok, err
	}
	tok = rand.Text()
	return tok, WritePrivateFile(path, []byte(tok+"\n"))
}

// WritePrivateFile writes data to path atomically with mode 0600, creating
// the parent directory (0700) if needed.
func WritePrivateFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	// After the rename the temporary name is gone and Remove fails with
	// ErrNotExist; before it, the write's error is the one to report.
	defer func() { _ = os.Remove(tmp.Name()) }()
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	// CreateTemp makes the file 0600; the rename keeps that mode.
	return atomic.ReplaceFile(tmp.Name(), path)
}

// SetUsage makes -h print the synopsis ("Usage: <synopsis>"), a
// description and the flags.
func SetUsage(synopsis, description string) {
	flag.Usage = func() {
		// As flag.PrintDefaults: help on a terminal that fails has
		// nowhere else to go.
		_, _ = fmt.Fprintf(flag.CommandLine.Output(), "Usage: %s\n\n%s\n\nFlags:\n", synopsis, description)
		flag.PrintDefaults()
	}
}

// Main ends a program's main function: it makes the stderr logger at
// level and calls run; on an error it prints "<name>: <error>" and exits
// with status 1.
func Main(name, level string, run func(*slog.Logger) error) {
	log, err := NewLogger(os.Stderr, level)
	if err == nil {
		err = run(log)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

// JoinOnReturn calls fn and joins its error, prefixed with what, to *errp.
// Deferred in a function with a named error result, it makes a store or
// server that fails to close or shut down at the end of a run fail the run:
//
//	defer demo.JoinOnReturn(&err, "closing the store", store.Close)
func JoinOnReturn(errp *error, what string, fn func() error) {
	if err := fn(); err != nil {
		*errp = errors.Join(*errp, fmt.Errorf("%s: %w", what, err))
	}
}
