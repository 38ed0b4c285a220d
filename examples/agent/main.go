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
// It loads or generates its agreement keys (a 0600 file in -dir), registers
// its identity with the agbot (demo attestation from the bootstrap token),
// keeps the certificate renewed and published on the agbot's relay (again
// when a restarted agbot's relay no longer holds it), registers again on
// its own when the agbot answers that it does not know the identity (its
// records lost it) or that it is revoked or expired, and polls the relay
// for sealed messages: it opens proposals and updates with
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
// timeouts, size limits and a connection bound (demo.Listen).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/examples/internal/demo"
	"github.com/edgesecrets/edgesecrets/relay"
	"github.com/edgesecrets/edgesecrets/secretstore"
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
	urls := strings.Split(c.agbotURL, ",")
	for i := range urls {
		urls[i] = strings.TrimSpace(urls[i])
	}
	// One identity, registered through whichever agbot answers: agbots
	// sharing a PostgreSQL state share the identity records.
	hub, err := identity.NewClient(identity.ClientOptions{BaseURL: urls[0] + "/identity", Fallbacks: identityURLs(urls[1:])})
	if err != nil {
		return err
	}
	// Run keeps the identity: it registers (again) on its own, with a
	// fresh attestation, whenever the agbot or its hub says it no longer
	// knows the agent (pollOne reports the relays' refusals).
	id, err := identity.NewAgent(identity.AgentOptions{Instance: me, SigningKey: keys.Signer(), EncryptionKey: keys.Public().EncryptionKey(), Hub: hub,
		InitialBackoff: registerBackoff, MaxBackoff: maxRegisterBackoff, Logger: log,
		Attest: func(context.Context) (identity.Attestation, error) {
			return demo.Attest(bootstrap, me, time.Now()), nil
		}})
	if err != nil {
		return err
	}
	var upstreams []*upstream
	for _, u := range urls {
		relayClient, err := relay.NewClient(u, nil)
		if err != nil {
			return err
		}
		upstreams = append(upstreams, &upstream{url: u, relay: relayClient, identity: id})
	}

	tokens := &agentapi.TokenTable{}
	storeOpts := agentapi.Options{Root: c.secretsDir, StatusFiles: true, Tokens: tokens, Logger: log}
	if c.memoryDir != "" {
		storeOpts.MemoryDir, storeOpts.SealKeys = c.memoryDir, keys
	}
	store, err := agentapi.Open(ctx, storeOpts)
	if err != nil {
		return err
	}
	defer demo.JoinOnReturn(&err, "closing the store", store.Close)
	a, err := newAgent(store, tokens, agentOptions{
		log: log, keys: keys, agbotKeys: agbotKeys, node: relay.Node{Org: c.org, Node: c.node},
		upstreams: upstreams, envDir: c.envDir,
	})
	if err != nil {
		return err
	}
	var openHorizon bool
	switch c.profile {
	case "design":
	case "openhorizon":
		openHorizon = true
	default:
		return fmt.Errorf("-profile %q: want design or openhorizon", c.profile)
	}
	apiURL, shutdown, err := a.serveAPI(c, openHorizon)
	if err != nil {
		return err
	}
	defer demo.JoinOnReturn(&err, "shutting down the secrets API", shutdown)
	if err := os.MkdirAll(c.envDir, 0o700); err != nil {
		return err
	}
	// Instances kept from an earlier run get fresh tokens; their services
	// re-read the environment file when the old token is refused.
	for _, inst := range store.InstanceIDs() {
		if err := a.provide(inst); err != nil {
			return err
		}
	}
	log.Info("agent serving the secrets API", slog.String("url", apiURL), slog.String("profile", c.profile), slog.String("instance", me.String()))

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	if len(upstreams) == 1 {
		up := upstreams[0]
		if err := a.register(ctx, up, bootstrap, me, 10); err != nil {
			return err
		}
		wg.Go(func() {
			// Run registers again by itself when the identity is lost; it
			// returns only for a refusal no registration fixes.
			if err := up.identity.Run(ctx); !errors.Is(err, context.Canceled) {
				cancel(fmt.Errorf("identity refused, restart the agent to register again: %w", err))
			}
		})
	} else {
		// Several agbots sharing a PostgreSQL state: one that is down
		// (or restarted) does not stop the agent, which registers
		// through another.
		wg.Go(func() { a.keepRegistered(ctx, upstreams[0], bootstrap, me) })
	}
	a.poll(ctx, c.poll)
	cancel(nil)
	wg.Wait()
	log.Info("agent stopping")
	if err := context.Cause(ctx); !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// serveAPI serves the services' API: over HTTP in the design profile; in
// the Open Horizon profile over HTTPS on the loopback port and a unix
// socket, as Open Horizon's agent serves its ESS API, with a certificate
// in <dir>/ess for services to trust. It returns the API's base URL.

// Backoff of the agent's registrations and renewals: from the first
// failure's, doubling up to the longest.
const (
	registerBackoff    = 500 * time.Millisecond
	maxRegisterBackoff = 10 * time.Second
)

// identityURLs returns the identity APIs of the agbots at urls.
func identityURLs(urls []string) []string {
	out := make([]string, len(urls))
	for i, u := range urls {
		out[i] = u + "/identity"
	}
	return out
}

// register registers the agent's identity through the agbots, retrying while
// none is reachable, at most attempts times (0: until ctx ends).
// The poll loop publishes the certificate on the relay.
func (a *agent) register(ctx context.Context, up *upstream, bootstrap string, me identity.Identity, attempts int) error {
	delay := registerBackoff
	for attempt := 1; ; attempt++ {
		cert, err := up.identity.Register(ctx, demo.Attest(bootstrap, me, time.Now()))
		if err == nil {
			a.log.Info("identity registered", slog.String("agbot", up.url), slog.String("serial", cert.SerialNumber.Text(16)), slog.Time("not_after", cert.NotAfter))
			return nil
		}
		if attempt == attempts || attempts > 0 && (errors.Is(err, identity.ErrForbidden) || errors.Is(err, secretstore.ErrInvalid)) {
			return fmt.Errorf("registering the identity: %w", err)
		}
		a.log.Warn("registering the identity failed; retrying", slog.String("agbot", up.url), slog.String("err", err.Error()))
		if !demo.Sleep(ctx, delay) {
			return ctx.Err()
		}
		delay = min(2*delay, maxRegisterBackoff)
	}
}

// keepRegistered keeps the agent registered through several agbots
// until ctx ends: Run registers, keeps the certificate renewed, and
// registers again when the agbot no longer knows the identity (it
// restarted without the agent's identity record). When Run returns for a
// refusal it does not fix (a serial the agbot no longer accepts), the
// agent registers again here.
func (a *agent) keepRegistered(ctx context.Context, up *upstream, bootstrap string, me identity.Identity) {
	for ctx.Err() == nil {
		if err := up.identity.Run(ctx); ctx.Err() == nil {
			a.log.Warn("the agbot no longer renews the identity; registering again", slog.String("agbot", up.url), slog.String("err", err.Error()))
			if err := a.register(ctx, up, bootstrap, me, 0); err != nil {
				return
			}
		}
	}
}
