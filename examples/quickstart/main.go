// Command quickstart runs edgesecrets in one process. For now it covers the
// hub's secret store: it opens a store from a JSON config, writes, reads and
// lists secrets, prints a secret (its values redacted) and what the store
// monitor recorded.
//
//	go run ./examples/quickstart                      # in-memory store
//	go run ./examples/quickstart -config store.json   # a config of your own
//
// It exits with status 1 and a message on the first failure.
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/edgesecrets/edgesecrets/secretstore"
	_ "github.com/edgesecrets/edgesecrets/secretstore/memory" // registers the "memory" store type
)

// defaultConfig is the store config used without -config.
const defaultConfig = `{"type": "memory", "defaultScope": "myorg"}`

func main() {
	configPath := flag.String("config", "", "path of a JSON store config (default: an in-memory store)")
	flag.Parse()

	q, err := newQuickstart(*configPath, os.Stdout)
	if err == nil {
		err = q.run(context.Background())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// quickstart is one run of the program.
type quickstart struct {
	config  string                // JSON store config
	secrets []*secretstore.Secret // what to write
	out     io.Writer
}

// newQuickstart reads the config at configPath (defaultConfig when empty)
// and makes demo secrets with fresh random values.
func newQuickstart(configPath string, out io.Writer) (*quickstart, error) {
	config := defaultConfig
	if configPath != "" {
		b, err := os.ReadFile(configPath)
		if err != nil {
			return nil, fmt.Errorf("reading the store config: %w", err)
		}
		config = string(b)
	}
	return &quickstart{config: config, secrets: demoSecrets(), out: out}, nil
}

func demoSecrets() []*secretstore.Secret {
	return []*secretstore.Secret{
		{
			Name:   "db/password",
			Data:   secretstore.Data{"username": []byte("app"), "password": []byte(rand.Text())},
			Labels: map[string]string{"owner": "ops"},
		},
		{
			Name: "api/token",
			Data: secretstore.Data{"token": []byte(rand.Text())},
		},
	}
}

func (q *quickstart) run(ctx context.Context) error {
	store, err := q.openStore(ctx)
	if err != nil {
		return err
	}
	defer store.Close()
	monitor := secretstore.NewMonitor(store)

	if err := q.writeSecrets(ctx, monitor); err != nil {
		return err
	}
	if err := q.readSecret(ctx, monitor, q.secrets[0].Name); err != nil {
		return err
	}
	if err := q.listSecrets(ctx, monitor); err != nil {
		return err
	}
	q.printStats(monitor)
	return nil
}

func (q *quickstart) openStore(ctx context.Context) (secretstore.Store, error) {
	cfg, err := secretstore.ParseConfig(strings.NewReader(q.config))
	if err != nil {
		return nil, err
	}
	store, err := secretstore.Open(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening the %q store: %w", cfg.Type, err)
	}
	fmt.Fprintf(q.out, "opened a %q store, scope %q\n", cfg.Type, cfg.DefaultScope)
	return store, nil
}

// writeSecrets writes each secret, then the first one again unchanged to
// show that an unchanged write is skipped.
func (q *quickstart) writeSecrets(ctx context.Context, store secretstore.Store) error {
	for _, s := range q.secrets {
		changed, err := store.Put(ctx, s, secretstore.PutOptions{})
		if err != nil {
			return err
		}
		fmt.Fprintf(q.out, "wrote %s (changed: %v)\n", s.Name, changed)
	}
	changed, err := store.Put(ctx, q.secrets[0], secretstore.PutOptions{})
	if err != nil {
		return err
	}
	fmt.Fprintf(q.out, "wrote %s again, same content (changed: %v, so no backend write)\n", q.secrets[0].Name, changed)
	return nil
}

func (q *quickstart) readSecret(ctx context.Context, store secretstore.Store, name string) error {
	s, err := store.Get(ctx, name)
	if err != nil {
		return err
	}
	fmt.Fprintf(q.out, "read %s: %v\n", name, s)
	for _, k := range s.Data.Keys() {
		fmt.Fprintf(q.out, "  %s: %d bytes\n", k, len(s.Data[k]))
	}
	if _, err := store.Get(ctx, "no/such/secret"); !errors.Is(err, secretstore.ErrNotFound) {
		return fmt.Errorf("reading a missing secret: want a not-found error, got %v", err)
	}
	return nil
}

func (q *quickstart) listSecrets(ctx context.Context, store secretstore.Store) error {
	names, err := store.List(ctx, "")
	if err != nil {
		return err
	}
	fmt.Fprintf(q.out, "secrets in the store: %s\n", strings.Join(names, ", "))
	return nil
}

func (q *quickstart) printStats(m *secretstore.Monitor) {
	stats := m.Stats()
	fmt.Fprintln(q.out, "store calls:")
	for _, op := range slices.Sorted(maps.Keys(stats)) {
		fmt.Fprintf(q.out, "  %-6s %d calls, %d errors\n", op, stats[op].Calls, stats[op].Errors)
	}
	fmt.Fprintf(q.out, "last successful store interaction: %s\n", m.LastSuccess().UTC().Format(time.RFC3339))
}
