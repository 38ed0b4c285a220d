package agbotsecrets

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-horizon/anax/agreementbot/secrets"
	"github.com/open-horizon/anax/config"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/secretstore"
	_ "github.com/edgesecrets/edgesecrets/secretstore/awssm"  // a backend Initialize's config may name
	_ "github.com/edgesecrets/edgesecrets/secretstore/memory" // a backend Initialize's config may name
	_ "github.com/edgesecrets/edgesecrets/secretstore/vault"  // a backend Initialize's config may name
)

// Name is the plugin's name in anax's registry: the value of anax's
// AgreementBot.SecretsProvider that selects it.
const Name = "edgesecrets"

// defaultTimeout bounds each of the plugin's calls: anax's interface
// passes no context.
const defaultTimeout = 30 * time.Second

func init() { secrets.Register(Name, new(Plugin)) }

var _ secrets.AgbotSecrets = (*Plugin)(nil)

// Options configure a Plugin made with New.
type Options struct {
	// Store is the agbot's own store: it reads and lists with it (Vault's
	// openhorizon agbot policy gives read and list only), and on a store
	// that is not Vault it also writes for users the policy allows.
	// Required. The plugin does not close it.
	Store *secretstore.Store
	// AgbotID and AgbotToken are the agbot's exchange credentials
	// ("org/id" and its token). GetSecretDetails called with them reads
	// with Store, as anax's agreement workers call it.
	AgbotID    string
	AgbotToken edgesecrets.Sensitive
	// ExchangeURL is the exchange's API root, "https://host/v1/" (anax's
	// AgreementBot.ExchangeURL): where the plugin reads a user's role when
	// the store is not Vault.
	ExchangeURL string
	// ChangeFile is the change clock's file (see the package
	// documentation); empty keeps the clock in memory.
	ChangeFile string
	// UserAuthMount is vault-exchange-auth's mount on Vault, which users
	// log in through; default "openhorizon".
	UserAuthMount string
	// Timeout bounds each call of the plugin's; default 30s.
	Timeout time.Duration
	// Logger receives the plugin's diagnostics (names and outcomes, never
	// a value or credential); nil discards them.
	Logger *slog.Logger
	// HTTPClient calls the exchange; nil means a client with Timeout.
	HTTPClient *http.Client
}

// Plugin is the edgesecrets secrets plugin: anax's
// agreementbot/secrets.AgbotSecrets over a *secretstore.Store. Its zero
// value is what anax's registry holds and configures with Initialize;
// embedders and tests make one with New. Its methods are safe for
// concurrent use.
type Plugin struct {
	mu       sync.Mutex
	opts     Options
	storeCfg *secretstore.Config // set by Initialize: Login opens it
	store    *secretstore.Store
	ownStore bool
	ready    bool
	clock    *changeClock
	log      *slog.Logger
	client   *http.Client
	lastUser atomic.Int64 // unix seconds of the last answer to a user's request
}

// New returns a plugin over opts.Store. Call Login before use, as anax
// does.
func New(opts Options) (*Plugin, error) {
	if opts.Store == nil {
		return nil, fmt.Errorf("%w: Options.Store is nil", errConfig)
	}
	p := &Plugin{}
	p.configure(opts)
	p.store = opts.Store
	return p, nil
}

// configure applies opts' defaults.
func (p *Plugin) configure(opts Options) {
	if opts.Timeout <= 0 {
		opts.Timeout = defaultTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: opts.Timeout}
	}
	if opts.ExchangeURL != "" {
		opts.ExchangeURL = strings.TrimRight(opts.ExchangeURL, "/") + "/"
	}
	p.opts, p.log, p.client = opts, opts.Logger.With("plugin", Name), opts.HTTPClient
	p.clock = &changeClock{path: opts.ChangeFile}
}

// String describes the plugin without its credentials.
func (p *Plugin) String() string { return "agbotsecrets.Plugin{agbot: " + p.opts.AgbotID + "}" }

// Initialize configures the plugin from anax's config: the file named by
// AgreementBot.SecretsProviderConfig (see the package documentation) and
// the agbot's exchange id, token and URL. It opens nothing: Login does.
func (p *Plugin) Initialize(cfg *config.HorizonConfig) error {
	if cfg == nil {
		return fmt.Errorf("%w: no anax config", errConfig)
	}
	fc, err := readConfigFile(cfg.AgreementBot.SecretsProviderConfig)
	if err != nil {
		return err
	}
	token := edgesecrets.Sensitive(cfg.AgreementBot.ExchangeToken)
	storeCfg, err := storeConfig(fc.Store, cfg.AgreementBot.ExchangeId, token)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeLocked()
	p.store = nil // an embedder's store from New is not the configured one
	p.configure(Options{
		AgbotID: cfg.AgreementBot.ExchangeId, AgbotToken: token, ExchangeURL: cfg.AgreementBot.ExchangeURL,
		ChangeFile: fc.ChangeFile, UserAuthMount: fc.UserAuthMount,
	})
	p.storeCfg = &storeCfg
	p.log.Info("initialized", "store", storeCfg, "changeFile", fc.ChangeFile)
	return nil
}

// ctx returns a context bounded by the plugin's timeout.
func (p *Plugin) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), p.opts.Timeout)
}

// Login opens the store (when Initialize configured one), reads the change
// file and checks the store's credentials; the plugin is ready when it
// returns nil. anax calls it at start and whenever IsReady is false.
func (p *Plugin) Login() error {
	ctx, cancel := p.ctx()
	defer cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.store == nil {
		if p.storeCfg == nil {
			return fmt.Errorf("%w: Login before Initialize", errConfig)
		}
		st, err := secretstore.Open(ctx, *p.storeCfg, secretstore.OpenOptions{Logger: p.opts.Logger})
		if err != nil {
			return fmt.Errorf("agbotsecrets: opening the secret store: %w", err)
		}
		p.store, p.ownStore = st, true
	}
	if err := p.clock.load(); err != nil {
		return err
	}
	if err := p.store.CheckCredentials(ctx); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		if p.ownStore && errors.Is(err, edgesecrets.ErrPermission) {
			p.closeLocked() // the next Login opens it again, logging in anew
		}
		return fmt.Errorf("agbotsecrets: the secret store refuses the agbot: %w", err)
	}
	p.ready = true
	p.log.Info("logged in")
	return nil
}

// Renew checks that the store still accepts the agbot's credentials (the
// store renews and replaces its own token). When it rejects them, the
// plugin is no longer ready, so that anax calls Login.
func (p *Plugin) Renew() error {
	ctx, cancel := p.ctx()
	defer cancel()
	p.mu.Lock()
	st := p.store
	p.mu.Unlock()
	if st == nil {
		return p.Login()
	}
	err := st.CheckCredentials(ctx)
	switch {
	case err == nil, errors.Is(err, errors.ErrUnsupported):
		return nil
	case errors.Is(err, edgesecrets.ErrPermission):
		p.mu.Lock()
		p.ready = false
		p.mu.Unlock()
	}
	return fmt.Errorf("agbotsecrets: renewing: %w", err)
}

// IsReady reports whether Login succeeded and the store's credentials were
// not rejected since.
func (p *Plugin) IsReady() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ready
}

// GetLastVaultStatus returns when the store last answered, the agbot's or
// a user's request, in unix seconds (0: never): anax's /health
// lastVaultInteraction.
func (p *Plugin) GetLastVaultStatus() uint64 {
	last := p.lastUser.Load()
	if st := p.agbotStore(); st != nil {
		if t := st.LastSuccess(); !t.IsZero() {
			last = max(last, t.Unix())
		}
	}
	return uint64(max(last, 0))
}

// Close closes the store when the plugin opened it.
func (p *Plugin) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeLocked()
	p.log.Info("closed")
}

// closeLocked closes an own store; p.mu is held.
func (p *Plugin) closeLocked() {
	if p.ownStore && p.store != nil {
		_ = p.store.Close()
		p.store, p.ownStore = nil, false
	}
	p.ready = false
}

// agbotStore returns the agbot's store, or nil before Login.
func (p *Plugin) agbotStore() *secretstore.Store {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.store
}

// noteUserAnswer records when a user's store last answered.
func (p *Plugin) noteUserAnswer(st *secretstore.Store) {
	t := st.LastSuccess()
	if t.IsZero() {
		return
	}
	for {
		old := p.lastUser.Load()
		if t.Unix() <= old || p.lastUser.CompareAndSwap(old, t.Unix()) {
			return
		}
	}
}
