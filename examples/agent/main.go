// Command agent is the node side of the edgesecrets example: an edge agent
// that receives secrets sealed to its own keys and serves them to its
// service instances. Run it with the agbot and service examples (see the
// README and examples/threeproc_test.go):
//
//	agent -agbot http://127.0.0.1:8081 -agbot-keys agbot-state/agbot.pub \
//	      -bootstrap-token-file agbot-state/bootstrap-token -node node-1
//
// With -agbot URL1,URL2 (agbots sharing a PostgreSQL state, and so the
// identity records) it registers once, through whichever answers, and
// takes messages from each: when one agbot dies, another
// takes over its agreements and reaches the agent through its own relay.
//
// Everything but the files, the flags and the servers is the library's
// agent front door (package agent), which this program configures: it
// loads or generates its agreement keys (a 0600 file in -dir), and the
// agent registers its identity with the agbot (demo attestation from the
// bootstrap token), keeps the certificate renewed and published on the
// agbot's relay (again when a restarted agbot's relay no longer holds it),
// registers again on its own when the agbot answers that it does not know
// the identity (its records lost it) or that it is revoked or expired, and
// polls the relay for sealed messages: it opens proposals and updates with
// its keys (only messages signed by the pinned agbot keys open), applies
// them to the on-node store (agentapi: one root-only directory per service
// instance), and posts a sealed reply. A cancellation wipes the instance.
//
// With -profile openhorizon it serves Open Horizon's /api/v1/secrets
// instead, as Open Horizon's agent serves it: over HTTPS, on a unix socket
// (-ess-socket, default <dir>/ess/essapi.sock) and the loopback port, with a
// fresh self-signed certificate in <dir>/ess/cert.pem that services trust
// (curl --cacert <dir>/ess/cert.pem --unix-socket <dir>/ess/essapi.sock
// https://localhost/api/v1/secrets); a service's HTTP Basic id and token
// are those of its environment file.
//
// For each service instance it writes an environment file (<env-dir>/<instance>.json,
// 0600) with the /secrets API URL, the instance id and token, and the
// directory of its secret files: a stand-in for the environment variables
// and the read-only bind mount at /open-horizon-secrets a real agent gives
// the container. The instance id is the service's container name. Secret
// values are written under the agentapi root only (messages are never
// saved), together with the agreements' replay state (sequence numbers,
// kept so a replayed message stays refused after a restart); -dir holds the
// agent's keys (0600). With -memory-dir (a tmpfs) the secret files live
// only in memory and the root keeps a copy sealed to the agent's keys,
// restored after a restart or reboot. The /secrets API is served with
// timeouts, size limits and a connection bound (demo.Listen), and beside
// it GET /metrics: the agent's OpenTelemetry metrics in Prometheus' format
// (messages, files, registrations, API requests; never a value).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/edgesecrets/edgesecrets/agent"
	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/examples/internal/demo"
)

// Files in -dir.
const keysFile = "agent-keys.pem" // the agent's agreement key set

type config struct {
	agbotURL, agbotKeys, bootToken string
	dir, secretsDir, envDir        string
	memoryDir                      string
	org, node, provider, instance  string
	listen, addrFile               string
	profile, essSocket             string
	poll                           time.Duration
	logLevel                       string
}

// envAgbotURL names the environment variable from which hzn takes the URL
// of the agbot's secure API (anax cli/cliutils/cliutils.go,
// GetAgbotSecureAPIUrlBase).
const envAgbotURL = "HZN_AGBOT_URL"

func main() {
	var c config
	agbotURL := os.Getenv(envAgbotURL)
	if agbotURL == "" {
		agbotURL = "http://127.0.0.1:8081"
	}
	flag.StringVar(&c.agbotURL, "agbot", agbotURL, "the agbot's `URL` (default $"+envAgbotURL+" when set); several, comma-separated, for agbots sharing a PostgreSQL state: the agent registers through whichever answers and takes messages from each")
	flag.StringVar(&c.agbotKeys, "agbot-keys", "", "`file` of the agbot's public keys (the agbot's agbot.pub), pinned: only messages it signed are opened (required)")
	flag.StringVar(&c.bootToken, "bootstrap-token-file", "", "`file` of the bootstrap token shared with the agbot, for the demo attestation (required)")
	flag.StringVar(&c.dir, "dir", "agent-state", "state `directory`: the agent's agreement keys ("+keysFile+", 0600)")
	flag.StringVar(&c.secretsDir, "secrets-dir", "", "root `directory` of the secret files, one root-only directory per service instance, and of the replay state (default <dir>/secrets)")
	flag.StringVar(&c.memoryDir, "memory-dir", "", "`directory` on a tmpfs (mode 0700) for the secret files: no value is then written to persistent storage; the secrets dir keeps a copy sealed to the agent's keys")
	flag.StringVar(&c.envDir, "env-dir", "", "`directory` of the per-instance environment files the services read (default <dir>/env)")
	flag.StringVar(&c.org, "org", "myorg", "the node's `organisation`")
	flag.StringVar(&c.node, "node", "node-1", "the node `id`")
	flag.StringVar(&c.provider, "provider", "demo", "the `provider` that vouches for this agent instance")
	flag.StringVar(&c.instance, "instance-id", "", "this agent instance's `id` within the provider (default the node id)")
	flag.StringVar(&c.listen, "listen", "127.0.0.1:8082", "loopback `address` of the services' /secrets API (port 0: any free port)")
	flag.StringVar(&c.addrFile, "addr-file", "", "write the /secrets API URL to this `file` once listening")
	flag.StringVar(&c.profile, "profile", "design", "the services' API `profile`: design (/secrets over HTTP) or openhorizon (/api/v1/secrets over HTTPS, as Open Horizon's agent serves it, with the certificate in <dir>/ess/"+demo.ESSCertFile+")")
	flag.StringVar(&c.essSocket, "ess-socket", "", "with -profile openhorizon, also serve the API on this unix socket `path` (default <dir>/ess/"+demo.ESSSocketFile+")")
	flag.DurationVar(&c.poll, "poll", time.Second, "how often the relay is polled for messages")
	flag.StringVar(&c.logLevel, "log-level", "info", "log `level`: debug, info, warn or error (logs go to stderr and never hold values)")
	demo.SetUsage("agent -agbot-keys agbot.pub -bootstrap-token-file token [flags]",
		"The node side of the edgesecrets example: registers its identity, opens sealed\n"+
			"proposals and updates, stores the secrets per service instance and serves /secrets.")
	flag.Parse()
	demo.Main("agent", c.logLevel, func(log *slog.Logger) error { return run(c, log) })
}

func run(c config, log *slog.Logger) (err error) {
	if c.agbotKeys == "" || c.bootToken == "" {
		return errors.New("-agbot-keys and -bootstrap-token-file are required (see -h)")
	}
	if c.secretsDir == "" {
		c.secretsDir = filepath.Join(c.dir, "secrets")
	}
	if c.envDir == "" {
		c.envDir = filepath.Join(c.dir, "env")
	}
	if c.instance == "" {
		c.instance = c.node
	}
	if c.poll <= 0 {
		return errors.New("-poll must be positive")
	}
	me := identity.Identity{Provider: c.provider, Org: c.org, Node: c.node, InstanceID: c.instance}
	if err := me.Validate(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return err
	}
	keys, created, err := demo.LoadOrCreateKeys(filepath.Join(c.dir, keysFile))
	if err != nil {
		return err
	}
	log.Info("agreement keys", slog.Bool("created", created), slog.Any("keys", keys))
	pinned, err := os.ReadFile(c.agbotKeys)
	if err != nil {
		return fmt.Errorf("agbot keys: %w", err)
	}
	agbotKeys := new(agreement.PublicKeys)
	if err := agbotKeys.UnmarshalText(pinned); err != nil {
		return fmt.Errorf("agbot keys %s: %w", c.agbotKeys, err)
	}
	bootstrap, err := demo.ReadToken(c.bootToken)
	if err != nil {
		return fmt.Errorf("bootstrap token: %w", err)
	}
	var openHorizon bool
	switch c.profile {
	case "design":
	case "openhorizon":
		openHorizon = true
	default:
		return fmt.Errorf("-profile %q: want design or openhorizon", c.profile)
	}
	if err := os.MkdirAll(c.envDir, 0o700); err != nil {
		return err
	}
	files := agentapi.Options{Root: c.secretsDir, StatusFiles: true}
	if c.memoryDir != "" {
		files.MemoryDir, files.SealKeys = c.memoryDir, keys
	}
	env := &envFiles{dir: c.envDir, log: log}
	meters, metrics, err := demo.Metrics()
	if err != nil {
		return err
	}
	defer demo.JoinOnReturn(&err, "flushing the metrics", func() error { return meters.Shutdown(context.Background()) })
	a, err := agent.New(ctx, agent.Options{
		Instance: me,
		Keys:     keys,
		Agbot:    agbotKeys,
		Agbots:   strings.Split(c.agbotURL, ","),
		Attest: func(context.Context) (identity.Attestation, error) {
			return demo.Attest(bootstrap, me, time.Now()), nil
		},
		Files:              files,
		OnInstance:         env.write,
		OnMessage:          env.removeWiped,
		OpenHorizon:        openHorizon,
		PollInterval:       c.poll,
		RegisterBackoff:    registerBackoff,
		MaxRegisterBackoff: maxRegisterBackoff,
		MeterProvider:      meters,
		Logger:             log,
	})
	if err != nil {
		return err
	}
	defer demo.JoinOnReturn(&err, "closing the store", a.Close)
	apiURL, shutdown, err := serveAPI(c, demo.WithMetrics(metrics, a.Handler()), openHorizon, log)
	if err != nil {
		return err
	}
	defer demo.JoinOnReturn(&err, "shutting down the secrets API", shutdown)
	env.setAPI(apiURL)
	log.Info("agent serving the secrets API", slog.String("url", apiURL), slog.String("profile", c.profile), slog.String("instance", me.String()))
	err = a.Run(ctx)
	log.Info("agent stopping")
	return err
}

// Backoff of the agent's registrations and renewals: from the first
// failure's, doubling up to the longest.
const (
	registerBackoff    = 500 * time.Millisecond
	maxRegisterBackoff = 10 * time.Second
)

// serveAPI serves the services' API on hardened servers (timeouts, size
// limits, a connection bound): the design profile over HTTP on loopback
// (demo.Listen), or Open Horizon's profile over HTTPS on a unix socket and
// loopback (demo.ListenESS), as Open Horizon's agent serves its ESS API,
// with a certificate in <dir>/ess for services to trust. It returns the
// API's URL and how to shut it down.
func serveAPI(c config, h http.Handler, openHorizon bool, log *slog.Logger) (string, func() error, error) {
	if !openHorizon {
		srv, err := demo.Listen(c.listen, c.addrFile, h, log)
		if err != nil {
			return "", nil, err
		}
		return srv.URL, srv.Shutdown, nil
	}
	dir := filepath.Join(c.dir, "ess")
	if c.essSocket == "" {
		c.essSocket = filepath.Join(dir, demo.ESSSocketFile)
	}
	ess, err := demo.ListenESS(demo.ESSOptions{Addr: c.listen, AddrFile: c.addrFile, Socket: c.essSocket, Dir: dir, Handler: h, Logger: log})
	if err != nil {
		return "", nil, err
	}
	log.Info("ESS endpoint", slog.String("socket", ess.Socket), slog.String("cert", ess.CertFile))
	return ess.URL, ess.Shutdown, nil
}

// envFiles are the per-instance environment files the services read: a
// stand-in for the environment variables and the bind mount a real agent
// gives the container.
type envFiles struct {
	dir string
	log *slog.Logger

	mu  sync.Mutex
	api string // the services' API URL
}

func (e *envFiles) setAPI(url string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.api = url
}

// write is the agent's OnInstance: the instance's environment file, with
// its token.
func (e *envFiles) write(_ context.Context, inst agent.Instance) error {
	e.mu.Lock()
	api := e.api
	e.mu.Unlock()
	return demo.WriteEnv(e.path(inst.ID), demo.Env{API: api, Instance: inst.ID, Token: string(inst.Token), Mount: inst.Mount})
}

// removeWiped is the agent's OnMessage: a cancellation's instances lose
// their environment files.
func (e *envFiles) removeWiped(_ context.Context, got agentapi.Received, err error) {
	if err != nil {
		return
	}
	for _, id := range got.Removed {
		if err := os.Remove(e.path(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			e.log.Warn("could not remove an instance's environment file", slog.String("instance", id), slog.String("err", err.Error()))
		}
	}
}

func (e *envFiles) path(instance string) string {
	return filepath.Join(e.dir, instance+".json")
}
