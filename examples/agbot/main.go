// Command agbot is the hub side of the edgesecrets example: an agreement
// bot holding the secret store. Run it with the agent and service examples
// (see the README and examples/threeproc_test.go):
//
//	agbot -deployment deployment.json [-store store.json] [-dir agbot-state]
//
// It serves, on a loopback address:
//
//	/org/{org}/secrets..., /allsecrets    Open Horizon's secrets-manager API, as hzn secretsmanager uses it (admin token)
//	GET /deploycheck/secretbindingcompatible   anax's secure-API compatibility check (admin token); hzn
//	                                      deploycheck secretbinding does not call it: it LISTs each bound
//	                                      name, /org/{org}/secrets/{name} (anax cli/deploycheck/secretbinding.go
//	                                      line 67, exchange/secret.go lines 15-35, commit 2f3fa5a)
//	GET /secrets/{name...}                the design's existence route (admin token)
//	GET /health                           anax's health answer (open)
//	/identity/instance...                 agent identity: register, refresh; revoke with the admin token
//	/relay/...                            the agreement-message relay standing in for the exchange (untrusted, open)
//	PUT, DELETE /admin/secrets/{name...}  a demo admin API writing to the store (admin token)
//	GET /admin/health, /admin/agreements/{id}   the delivery engine's health and an agreement's
//	                                      status, with the reason it is held back, if so (admin token)
//	GET /admin/agreements?reason=…        the agreements not in sync, with why, paged (admin token)
//	POST /admin/cancellations/release     releases the cancellations the budget held (admin token)
//	GET /metrics                          OpenTelemetry metrics in Prometheus' format (open; no values)
//
// Everything but the demo admin API, the files and the flags is the
// library's agbot front door (package agbot), which this program
// configures: its handler is the server's own, with the secrets APIs
// (package secretsapi) in front, so that no mux cleans a path and
// redirects it to another secret first. They take the admin token as a
// bearer token or as the password of "<org>/admin", so hzn works against
// them: HZN_AGBOT_URL=<agbot URL> hzn secretsmanager secret add -u
// myorg/admin:<token> ...
//
// When an agent publishes its identity certificate on the relay, the agbot
// verifies it and deploys the -deployment file's services to the node
// through its delivery engine (delivery.Engine.Deploy: validated with the
// store checking that bound secrets exist; waiting for missing ones;
// retried through the store's or the state's trouble): the engine seals
// the proposal to the agent's certified key, polls the store, and delivers
// rotations as sealed updates and revocations as cancellations, retrying
// until the agent acknowledges, for as long as the agreement exists.
//
// On SIGHUP the agbot reads the -deployment file again and registers every
// node's agreement anew with it: a changed secretBinding (other vault
// secrets for the same service secrets) reaches the running services in
// place, as new content of the same secret files, without a new agreement;
// changed services end the agreement and make it again.
//
// The engine's state (what each agent was sent and acknowledged: store
// names and content tags, never values) is in -state:
//
//	-state FILE          an embedded, crash-safe file (default <dir>/agbot-state.db),
//	                     which also keeps the hub's identity records
//	-state memory        in memory: lost when the agbot stops
//	-state postgres://…  PostgreSQL, shared by several agbots (each with its own
//	                     -member id, the same agreement keys and hub CA): each
//	                     agreement is delivered by one live agbot at a time,
//	                     and the others take over the agreements of one that dies
//
// Each node has one agreement, whose id is derived from the node, so agbots
// sharing a state never make two. Its envelope sequences grow within one
// state: an agent still holding an agreement made with a state that is gone
// (a deleted state file) refuses the lower sequences of a new one, so such
// a node needs a fresh agent.
//
// With a state file, a restarted agbot (even after kill -9) carries on where
// it stopped: the agents keep running, publish their certificates again on
// its new relay, and get every update they lack. Its agreement keys
// (agbot-keys.pem) and the hub's identity CA (hub-ca.pem, hub-ca-key.pem,
// 0600) are kept in -dir, so the agents' pinned keys and certificates stay
// valid.
//
// Agents register with a demo attestation keyed by a bootstrap token file
// the agbot creates and the agent reads: a stand-in for a provider's
// signed instance identity document.
package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/edgesecrets/edgesecrets/agbot"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/boltstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/pgstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/examples/internal/demo"
	"github.com/edgesecrets/edgesecrets/secretsapi"
	"github.com/edgesecrets/edgesecrets/secretstore"
	_ "github.com/edgesecrets/edgesecrets/secretstore/awssm"  // registers "awssm"
	_ "github.com/edgesecrets/edgesecrets/secretstore/memory" // registers "memory"
	_ "github.com/edgesecrets/edgesecrets/secretstore/vault"  // registers "vault"
	"go.opentelemetry.io/otel/metric"
)

// Files in the state directory.
const (
	keysFile       = "agbot-keys.pem"
	publicKeysFile = "agbot.pub"
	caFile         = "hub-ca.pem"
	caKeyFile      = "hub-ca-key.pem"
	stateFile      = "agbot-state.db" // the default -state
)

type config struct {
	listen, addrFile, dir     string
	storeConfig, preload      string
	deployment                string
	adminTokenFile, bootToken string
	state, member             string
	watchInterval, backoff    time.Duration
	maxBackoff, replyTimeout  time.Duration
	grace, leasePeriod        time.Duration
	logLevel                  string
}

func main() {
	var c config
	flag.StringVar(&c.listen, "listen", "127.0.0.1:8081", "loopback `address` to serve on (port 0: any free port)")
	flag.StringVar(&c.addrFile, "addr-file", "", "write the agbot's URL to this `file` once listening")
	flag.StringVar(&c.dir, "dir", "agbot-state", "state `directory`: the agbot's agreement keys ("+keysFile+", 0600), its public keys for agents to pin ("+publicKeysFile+"), the hub's identity CA ("+caFile+", "+caKeyFile+"), default token files and state file")
	flag.StringVar(&c.state, "state", "", "the delivery engine's state: a `file` (default <dir>/"+stateFile+"), \"memory\", or a postgres:// URL shared by several agbots")
	flag.DurationVar(&c.leasePeriod, "lease-period", 30*time.Second, "with a PostgreSQL -state: how long after an agbot's last heartbeat the others take over its agreements")
	flag.StringVar(&c.member, "member", "", "this agbot's `id` among the agbots sharing a PostgreSQL state (default <hostname>-<name of -dir>); stable across restarts")
	flag.StringVar(&c.storeConfig, "store", "", "JSON secret store config `file` (memory, vault or awssm); default an in-memory store")
	flag.StringVar(&c.preload, "preload", "", "JSON `file` of secrets to write into the memory store at start: {\"<name>\": {\"<key>\": \"<value>\"}}")
	flag.StringVar(&c.deployment, "deployment", "", "deployment `file`: {\"org\", \"services\": [service definitions], \"deploymentPolicy\" or \"pattern\"} (required)")
	flag.StringVar(&c.adminTokenFile, "admin-token-file", "", "admin token `file`, created if missing (default <dir>/admin-token)")
	flag.StringVar(&c.bootToken, "bootstrap-token-file", "", "demo attestation bootstrap token `file` shared with agents, created if missing (default <dir>/bootstrap-token)")
	flag.DurationVar(&c.watchInterval, "watch-interval", 5*time.Second, "how often the store is polled for rotated and deleted secrets (at least 1s)")
	flag.DurationVar(&c.backoff, "update-backoff", 2*time.Second, "first wait before sending an unanswered message again; doubles each time up to -max-backoff, never gives up")
	flag.DurationVar(&c.maxBackoff, "max-backoff", time.Minute, "longest wait between two attempts to deliver a message")
	flag.DurationVar(&c.replyTimeout, "reply-timeout", 10*time.Second, "how long to wait for an agent's reply to a message")
	flag.DurationVar(&c.grace, "grace", 5*time.Minute, "how long a bound secret must stay deleted (or forbidden, while others read fine) before its agreements are cancelled; 0: at once")
	flag.StringVar(&c.logLevel, "log-level", "info", "log `level`: debug, info, warn or error (logs go to stderr and never hold values)")
	demo.SetUsage("agbot -deployment deployment.json [flags]",
		"The hub side of the edgesecrets example: validates a deployment, verifies agent\n"+
			"identities, seals secrets to agents and delivers rotations through a relay.")
	flag.Parse()
	demo.Main("agbot", c.logLevel, func(log *slog.Logger) error { return run(c, log) })
}

func run(c config, log *slog.Logger) (err error) {
	if c.deployment == "" {
		return errors.New("-deployment is required (see -h)")
	}
	if c.adminTokenFile == "" {
		c.adminTokenFile = filepath.Join(c.dir, "admin-token")
	}
	if c.bootToken == "" {
		c.bootToken = filepath.Join(c.dir, "bootstrap-token")
	}
	if c.member == "" {
		c.member = defaultMember(c.dir)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	dep, err := loadDeployment(c.deployment)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return err
	}
	keys, err := loadOrCreateKeys(c.dir)
	if err != nil {
		return err
	}
	adminToken, err := demo.ReadOrCreateToken(c.adminTokenFile)
	if err != nil {
		return fmt.Errorf("admin token: %w", err)
	}
	bootstrap, err := demo.ReadOrCreateToken(c.bootToken)
	if err != nil {
		return fmt.Errorf("bootstrap token: %w", err)
	}
	meters, metrics, err := demo.Metrics()
	if err != nil {
		return err
	}
	defer demo.JoinOnReturn(&err, "flushing the metrics", func() error { return meters.Shutdown(context.Background()) })
	store, cfg, err := openStore(ctx, c.storeConfig, meters, log)
	if err != nil {
		return err
	}
	defer demo.JoinOnReturn(&err, "closing the store", store.Close)
	if c.preload != "" {
		if cfg.Type != "memory" {
			return fmt.Errorf("-preload is for the memory store only, not %q", cfg.Type)
		}
		if err := preload(ctx, store, c.preload, log); err != nil {
			return err
		}
	}

	ca, createdCA, err := demo.LoadOrCreateCA(filepath.Join(c.dir, caFile), filepath.Join(c.dir, caKeyFile))
	if err != nil {
		return err
	}
	st, certs, stateDesc, err := openState(ctx, c, log)
	if err != nil {
		return err
	}
	defer demo.JoinOnReturn(&err, "closing the state", st.Close)
	agreements, err := count(ctx, st)
	if err != nil {
		return fmt.Errorf("reading the agreements in the state: %w", err)
	}

	grace := c.grace
	if grace == 0 {
		grace = delivery.NoGrace
	}
	deps := &deployments{current: dep}
	a, err := agbot.New(agbot.Options{
		Delivery: delivery.Options{
			Store:         store,
			State:         st,
			Keys:          keys,
			Interval:      c.watchInterval,
			Grace:         grace,
			ReplyTimeout:  c.replyTimeout,
			InitialDelay:  c.backoff,
			MaxDelay:      c.maxBackoff,
			Member:        c.member,
			MeterProvider: meters,
		},
		Identities:   certs,
		CA:           ca,
		Attest:       demo.NewAttestor(bootstrap),
		Authenticate: adminAuthenticator(dep.org, adminToken),
		Deploy:       deps.deploy,
		Fallback:     demo.WithMetrics(metrics, &adminHandler{store: store, token: adminToken, log: log}),
		Logger:       log,
	})
	if err != nil {
		return err
	}
	srv, err := demo.Listen(c.listen, c.addrFile, a.Handler(), log)
	if err != nil {
		return err
	}
	log.Info("agbot serving", slog.String("url", srv.URL), slog.String("store", cfg.Type), slog.String("org", dep.org),
		slog.String("state", stateDesc), slog.Int("agreements", agreements), slog.Bool("new_hub_ca", createdCA),
		slog.String("agbot_keys", filepath.Join(c.dir, publicKeysFile)))

	go deps.reloadOnHangup(ctx, c.deployment, a, log)
	err = a.Run(ctx)
	log.Info("agbot stopping")
	return errors.Join(err, srv.Shutdown())
}

// count returns the number of agreements in the state (made by this agbot
// before a restart, or by the other agbots sharing it).
func count(ctx context.Context, st state.Backend) (int, error) {
	n := 0
	err := st.Records(ctx, func(state.Record) bool { n++; return true })
	return n, err
}

// openState opens the delivery engine's state that -state names, and the
// identity records kept with it: in the state file, in the PostgreSQL
// database (shared by every agbot using it, so any of them verifies any
// agent, and an agent registers once whichever agbot it reaches), or in
// memory. It returns a description for the log, without credentials.
func openState(ctx context.Context, c config, log *slog.Logger) (state.Backend, identity.CertStore, string, error) {
	switch {
	case c.state == "memory":
		return state.NewMemory(), identity.NewMemoryCertStore(), "memory", nil
	case strings.HasPrefix(c.state, "postgres://") || strings.HasPrefix(c.state, "postgresql://"):
		st, certs, err := pgstate.Open(ctx, pgstate.Options{URL: c.state, LeasePeriod: c.leasePeriod, Logger: log})
		if err != nil {
			return nil, nil, "", fmt.Errorf("opening the PostgreSQL state: %w", err)
		}
		return st, certs, "postgresql (member " + c.member + ")", nil
	}
	path := c.state
	if path == "" {
		path = filepath.Join(c.dir, stateFile)
	}
	st, certs, err := boltstate.Open(path, boltstate.Options{Logger: log})
	if err != nil {
		return nil, nil, "", fmt.Errorf("opening the state file: %w", err)
	}
	return st, certs, path, nil
}

// defaultMember is the -member default: the host name and the name of the
// state directory, which stay the same when the agbot restarts.
func defaultMember(dir string) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "agbot"
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return host + "-" + filepath.Base(dir)
}

// adminAuthenticator is the demo's stand-in for the exchange: the admin
// token makes its bearer the organisation's administrator, as a bearer
// token (with or without anax's X-Organization and X-UserId) or as the
// password of "<org>/admin" (hzn's -u <org>/admin:<token>).
func adminAuthenticator(org, token string) func(context.Context, secretsapi.Credentials) (secretsapi.Caller, error) {
	return func(_ context.Context, c secretsapi.Credentials) (secretsapi.Caller, error) {
		user := c.User
		if c.Bearer && user == "" {
			user = "admin"
		}
		if c.Org != "" && c.Org != org || user != "admin" || subtle.ConstantTimeCompare([]byte(c.Secret), []byte(token)) != 1 {
			return secretsapi.Caller{}, errors.New("missing or wrong admin token")
		}
		return secretsapi.Caller{Org: org, ID: "admin", Role: secretsapi.RoleAdmin}, nil
	}
}

// openStore opens the store of the config file at path, or an in-memory
// store when path is empty.
func openStore(ctx context.Context, path string, meters metric.MeterProvider, log *slog.Logger) (*secretstore.Store, secretstore.Config, error) {
	r := strings.NewReader(`{"type": "memory"}`)
	var cfg secretstore.Config
	var err error
	if path == "" {
		cfg, err = secretstore.ParseConfig(r)
	} else {
		var f *os.File
		if f, err = os.Open(path); err != nil {
			return nil, cfg, err
		}
		cfg, err = secretstore.ParseConfig(f)
		_ = f.Close() // read only
	}
	if err != nil {
		return nil, cfg, fmt.Errorf("store config: %w", err)
	}
	store, err := secretstore.Open(ctx, cfg, secretstore.OpenOptions{MeterProvider: meters, Logger: log})
	if err != nil {
		return nil, cfg, fmt.Errorf("opening the %q store: %w", cfg.Type, err)
	}
	return store, cfg, nil
}

// loadOrCreateKeys reads the agbot's agreement keys from dir, or generates
// and writes them (0600), and writes the public keys for agents to pin.
func loadOrCreateKeys(dir string) (*agreement.PrivateKeys, error) {
	path := filepath.Join(dir, keysFile)
	keys, _, err := demo.LoadOrCreateKeys(path)
	if err != nil {
		return nil, fmt.Errorf("agbot keys %s: %w", path, err)
	}
	pub, err := keys.Public().MarshalText()
	if err != nil {
		return nil, err
	}
	if err := demo.WritePrivateFile(filepath.Join(dir, publicKeysFile), pub); err != nil {
		return nil, fmt.Errorf("agbot public keys: %w", err)
	}
	return keys, nil
}
