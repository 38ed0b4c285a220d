package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/edgesecrets/edgesecrets/agbot"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/relay"
	"github.com/edgesecrets/edgesecrets/secretstore"
	// Backends register themselves with secretstore.Open when imported; a
	// program imports the ones its store configs may name.
	_ "github.com/edgesecrets/edgesecrets/secretstore/awssm"
	_ "github.com/edgesecrets/edgesecrets/secretstore/memory"
	_ "github.com/edgesecrets/edgesecrets/secretstore/vault"
)

// DefaultStoreConfig is the store used without -store: in memory, with
// Open Horizon's "openhorizon" path prefix.
const DefaultStoreConfig = `{"type": "memory", "defaultScope": "openhorizon"}`

// waitTimeout bounds each wait for something another goroutine does (a
// watcher cycle, a delivery, a cancel).
const waitTimeout = 5 * time.Second

// Options configure Run.
type Options struct {
	// StoreConfig is the JSON store config (secretstore.ParseConfig).
	// Empty means DefaultStoreConfig.
	StoreConfig string
	// Out receives the narrated log. Nil discards it. A failed write does
	// not stop the run; Run reports the first one.
	Out io.Writer
	// Logger is given to every component. Nil discards.
	Logger *slog.Logger
	// WorkDir is where the agent's storage root is made (in a new
	// directory that Run removes). Empty means os.TempDir().
	WorkDir string
	// HTTPTransport carries every HTTP request of the flow (deployer to
	// agbot, service to agent). Nil means a clone of http.DefaultTransport.
	HTTPTransport http.RoundTripper
	// OnEnvelope, when set, is called with every sealed envelope the
	// exchange carries, in both directions.
	OnEnvelope func(envelope []byte)
	// NewValue makes every secret value and credential of the run: the
	// secrets the admin writes, service tokens, the deployer's password,
	// the attestation document. Nil means crypto/rand.Text.
	NewValue func() string

	// afterStep, when set, is called after each step with its name (tests).
	afterStep func(f *flow, step string)
}

// Run runs the whole flow once. It returns the first failure, naming the
// step; every resource it created (servers, goroutines, files, the secrets
// it wrote) is released before it returns. A narration that could not be
// written to Out is reported too.
func Run(ctx context.Context, opts Options) (err error) {
	f, err := newFlow(opts)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.close(), f.say.failed()) }()
	return f.run(ctx)
}

// flow is one run: the parties and what they share.
type flow struct {
	opts   Options
	say    *narrator
	log    *slog.Logger
	value  func() string
	client *http.Client
	ctx    context.Context // the run's context, for background work
	stop   context.CancelFunc
	bg     sync.WaitGroup // background goroutines (the delivery engine)

	storeConfig      secretstore.Config
	workDir          string // the agbot's state and the agent's files; removed by close
	admin            *admin
	provider         *provider
	deployerPassword string
	agbot            *hubAgbot
	deployer         *deployer
	agent            *nodeAgent
	exchange         *exchange
	service          *service

	pinnedKeys  *agreement.PublicKeys // the agbot keys the agent pins, when not the agbot's (tests)
	target      binding.Target        // the deployment policy the agbot deploys
	agreementID string
	secrets     []*demoSecret // what the admin wrote, to check what arrives
}

func newFlow(opts Options) (*flow, error) {
	if opts.StoreConfig == "" {
		opts.StoreConfig = DefaultStoreConfig
	}
	cfg, err := secretstore.ParseConfig(strings.NewReader(opts.StoreConfig))
	if err != nil {
		return nil, fmt.Errorf("store config: %w", err)
	}
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.NewValue == nil {
		opts.NewValue = rand.Text
	}
	transport := opts.HTTPTransport
	if transport == nil {
		transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	return &flow{
		opts:        opts,
		say:         &narrator{w: opts.Out, start: time.Now()},
		log:         opts.Logger.With("component", "quickstart"),
		value:       opts.NewValue,
		client:      &http.Client{Transport: transport, Timeout: 10 * time.Second},
		storeConfig: cfg,
		agreementID: agbot.AgreementID(relay.Node{Org: org, Node: nodeName}),
	}, nil
}

// pinned returns the agbot keys the agent pins: the agbot's own, unless
// a test changed them.
func (f *flow) pinned() *agreement.PublicKeys {
	if f.pinnedKeys != nil {
		return f.pinnedKeys
	}
	return f.agbot.keys.Public()
}

// step is one narrated stage of the flow.
type step struct {
	name string
	run  func(ctx context.Context) error
}

func (f *flow) steps() []step {
	return []step{
		{"start the hub", f.startHub},
		{"admin writes secrets", f.writeSecrets},
		{"deployer validates bindings", f.validateBindings},
		{"agent registers its identity", f.registerAgent},
		{"agbot deploys the agreement", f.awaitAgreement},
		{"exchange tampers and replays", f.tamperAndReplay},
		{"service reads its secrets", f.serviceReads},
		{"admin rotates a secret", f.rotate},
		{"exchange replays an old message", f.replayOld},
		{"service fetches the update", f.serviceFetchesUpdate},
		{"admin deletes the secret", f.deleteSecret},
	}
}

// run runs the steps in order. A panic in a step is turned into an error,
// so a bug fails the run with a message instead of killing the process
// half-way through its clean-up.
func (f *flow) run(ctx context.Context) (err error) {
	f.ctx, f.stop = context.WithCancel(ctx)
	current := "start"
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("step %q: panic: %v", current, r)
		}
	}()
	f.say.title("edgesecrets quickstart: the whole flow in one process (names only, never values)")
	for _, s := range f.steps() {
		current = s.name
		f.log.Debug("step", "name", s.name)
		if err := s.run(f.ctx); err != nil {
			return fmt.Errorf("step %q: %w", s.name, err)
		}
		if f.opts.afterStep != nil {
			f.opts.afterStep(f, s.name)
		}
	}
	f.say.done()
	return nil
}

// close stops the background work and releases everything the run made,
// also after a failure.
func (f *flow) close() error {
	if f.stop != nil {
		f.stop()
	}
	f.bg.Wait()
	var errs []error
	if f.service != nil {
		f.service.close()
	}
	if f.agent != nil {
		errs = append(errs, f.agent.close())
	}
	if f.exchange != nil {
		f.exchange.close()
	}
	if f.agbot != nil {
		errs = append(errs, f.agbot.close())
	}
	if f.admin != nil {
		// A fresh context: the run's may have ended, and a real store must
		// still be cleaned.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		errs = append(errs, f.admin.cleanUp(ctx), f.admin.store.Close())
		cancel()
	}
	if f.workDir != "" {
		errs = append(errs, os.RemoveAll(f.workDir))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("clean-up: %w", err)
	}
	return nil
}

// goBackground runs fn until the run ends; close waits for it.
func (f *flow) goBackground(what string, fn func(ctx context.Context) error) {
	f.bg.Go(func() {
		if err := fn(f.ctx); err != nil && !errors.Is(err, context.Canceled) {
			f.log.Error("background task ended", "task", what, "err", err.Error())
		}
	})
}

// waitFor polls cond until it reports done, fails, or waitTimeout passes.
func waitFor(ctx context.Context, what string, cond func() (done bool, err error)) error {
	ctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		done, err := cond()
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("gave up after %s waiting for %s: %w", waitTimeout, what, ctx.Err())
		case <-tick.C:
		}
	}
}

// narrator prints the narrated log. Parties running on other goroutines
// (the delivery engine) narrate too, so lines are written whole. A failed
// write does not stop the narration; the first one is kept for Run to
// report.
type narrator struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
	err   error // the first failed write
}

// sayf prints one line for a party. Never pass it a value.
func (n *narrator) sayf(who, format string, args ...any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.printf("%-9s %s\n", who, fmt.Sprintf(format, args...))
}

// title prints the run's first line.
func (n *narrator) title(line string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.printf("%s\n", line)
}

func (n *narrator) done() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.printf("done in %.1fs: every step did what it should\n", time.Since(n.start).Seconds())
}

// printf writes to w and keeps the first error. n.mu must be held.
func (n *narrator) printf(format string, args ...any) {
	if _, err := fmt.Fprintf(n.w, format, args...); err != nil && n.err == nil {
		n.err = err
	}
}

// failed returns the first failed write, or nil.
func (n *narrator) failed() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.err != nil {
		return fmt.Errorf("writing the narration: %w", n.err)
	}
	return nil
}

// registeredBackends lists the store types this program can open.
func registeredBackends() string { return strings.Join(secretstore.Backends(), ", ") }
