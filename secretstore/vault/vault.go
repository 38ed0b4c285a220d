// Package vault is the HashiCorp Vault backend of secretstore, built on the
// official github.com/hashicorp/vault/api client and its api/auth helpers.
//
// New returns a *secretstore.Store that keeps each secret as one entry of a
// KV secrets engine, version 1 or 2 (Config.KVVersion "auto" asks Vault
// which). A secret named n lives at <mount>/<parentPath>/<defaultScope>/n;
// names are validated by secretstore.ValidateName, so none can escape that
// prefix.
//
// On KV v2:
//   - Version is the KV version number and UpdatedAt its creation time;
//     Stat reads only the metadata endpoint.
//   - Labels are the secret's custom_metadata (Vault allows up to 64, with
//     non-empty printable values); a label-only change writes metadata and
//     keeps the version.
//   - A secret whose latest version is soft-deleted or destroyed is
//     NotFound, and List leaves it out (on Vault versions that support
//     exclude_deleted).
//   - PutOptions.IfVersion and CreateOnly use Vault's check-and-set.
//   - Delete removes the secret's metadata and all its versions.
//
// On KV v1 there are no versions and no metadata: Version is empty,
// UpdatedAt zero, a Put with labels or IfVersion fails with ErrInvalid
// (IfVersion on a missing secret: ErrConflict), CreateOnly is checked by a
// read before the write (not atomic), and a secret needs at least one key.
//
// Values are bytes: valid UTF-8 is stored as a JSON string, anything else
// as {"edgesecrets:base64": "..."} (see the package documentation). A Put that would change
// nothing reads the secret and writes nothing.
//
// Errors: 403 is ErrPermission; sealed, standby, unreachable, timeouts,
// 5xx and 429 are ErrUnavailable, which the store retries (Config.MaxAttempts
// times, within the caller's deadline: see secretstore.Store); a lost
// check-and-set is ErrConflict. Messages come from status codes and fixed
// phrases, never from request or response bodies, and never contain a
// token. Each attempt is one request: the vault/api client the store makes
// does not retry by itself.
//
// Authentication (token, AppRole, Kubernetes, JWT, Open Horizon's
// auth/openhorizon) happens in New; the token
// is renewed with a LifetimeWatcher, a fresh login follows when renewal
// ends, and a request refused because the token became invalid logs in
// again once and is retried. A token that can no longer be renewed nor
// replaced (one given by value or environment variable past its max TTL,
// a token file nobody updates, a login Vault refuses) is an outage of the
// store: logged at error level once, with its cause, named in the errors
// of refused requests, and reported by CheckCredentials, which asks
// Vault about the token (auth/token/lookup-self). The backend ignores
// VAULT_* environment variables: everything comes from Config.
//
// A program that has a vault/api client of its own, set up and kept logged
// in its own way, gives it in Options.Client, as with Go CDK's
// hashivault.OpenKeeper; the store then uses the client as it is, its
// token, namespace, TLS settings and retries included. Either way,
// Store.As(&client) with a **api.Client yields the client, for what the
// store does not cover (sys/health, other secrets engines).
//
// Open Horizon: with method "openhorizon" the store logs in through
// vault-exchange-auth with an exchange identity (an agbot's, whose policy
// reads and lists only), and AsCaller gives, for one request, a store
// acting with a user's own token, so Vault's per-user ACL policy decides
// what that user may read and write, as anax's Vault plugin has it.
//
// A policy for a store on KV v2 mount "secret" with parentPath "edge":
//
//	path "secret/data/edge/*"     { capabilities = ["create", "read", "update"] }
//	path "secret/metadata/edge/*" { capabilities = ["read", "list", "update", "delete"] }
//
// A store that only reads (an agbot's Get, Stat and List) needs "read" on
// data/ and "read", "list" on metadata/. Detecting the KV version needs no
// extra grant, nor does the credential check: every token may look itself
// up through Vault's default policy.
//
// Importing the package registers it with secretstore under the type
// "vault".
package vault

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-cleanhttp"
	"github.com/hashicorp/vault/api"
	"go.opentelemetry.io/otel/metric"
	"golang.org/x/time/rate"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/driver"
)

// backendType is the name the backend registers under.
const backendType = "vault"

func init() { secretstore.Register(backendType, backend{}) }

// Options carry what a config file cannot.
type Options struct {
	// Client, when set, is the vault/api client the store uses as it is,
	// logged in and kept so by its owner. Config's connection and login
	// settings (address, namespace, caBundle, caFile, tlsServerName,
	// timeout, rateLimit, rateBurst, auth) must then be empty. The client's
	// own retries happen inside each of the store's attempts, which
	// number Config.MaxAttempts when it is set and 1 otherwise.
	Client *api.Client
	// Logger receives logins, renewals and failures; never a token or a
	// value. Nil discards.
	Logger *slog.Logger
	// MeterProvider makes the store's instruments
	// (secretstore.Options.MeterProvider); nil means the global one.
	MeterProvider metric.MeterProvider
	// WrapTransport wraps the HTTP transport of the client New makes,
	// which already carries the configured TLS settings: to count or
	// record requests in tests, or to add tracing.
	WrapTransport func(http.RoundTripper) http.RoundTripper
}

// store is the driver on a Vault KV mount.
type store struct {
	client    *api.Client
	transport *http.Transport // nil for a caller's client
	auth      *authenticator  // nil for a caller's client
	addr      string
	mount     string
	kv        int    // 1 or 2
	base      string // parentPath inside the mount, "" for none

	// What AsCaller gives the stores it makes, as New gave this one.
	scope    string
	attempts int
	meter    metric.MeterProvider
	// revoke says Close revokes the token: a caller's, from AsCaller.
	revoke bool
}

// New validates cfg, logs in (unless opts.Client is given), detects the
// KV version when cfg.KVVersion is "auto", and returns a ready store.
// Close it to stop token renewal.
func New(ctx context.Context, cfg Config, opts Options) (*secretstore.Store, error) {
	d, err := newDriver(ctx, cfg, opts)
	if err != nil {
		return nil, err
	}
	attempts := defaultMaxAttempts
	switch {
	case cfg.MaxAttempts > 0:
		attempts = cfg.MaxAttempts
	case opts.Client != nil:
		attempts = 1
	}
	d.scope, d.attempts, d.meter = cfg.Scope, attempts, opts.MeterProvider
	st, err := secretstore.New(d, secretstore.Options{Scope: cfg.Scope, MaxAttempts: attempts, Backend: backendType, MeterProvider: opts.MeterProvider})
	if err != nil {
		_ = d.Close()
		return nil, err
	}
	return st, nil
}

// newDriver validates cfg and returns a logged-in driver.
func newDriver(ctx context.Context, cfg Config, opts Options) (*store, error) {
	if err := cfg.validate(opts.Client != nil); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mount := strings.Trim(cfg.Mount, "/")
	if mount == "" {
		mount = defaultMount
	}
	s := &store{addr: cfg.Address, mount: mount, base: joinPath(cfg.ParentPath)}
	if opts.Client != nil {
		s.client, s.addr = opts.Client, opts.Client.Address()
	} else if err := s.connect(cfg, opts.WrapTransport, log); err != nil {
		return nil, err
	}
	first, err := s.login(ctx)
	if err == nil {
		err = s.detectKV(ctx, cfg.KVVersion)
	}
	if err != nil {
		s.closeIdle()
		return nil, err
	}
	if s.auth != nil {
		go s.auth.run(first)
	}
	return s, nil
}

// connect makes the store's own client from cfg.
func (s *store) connect(cfg Config, wrap func(http.RoundTripper) http.RoundTripper, log *slog.Logger) error {
	timeout, _ := time.ParseDuration(cfg.Timeout) // validated
	if timeout == 0 {
		timeout = defaultTimeout
	}
	invalid := func(err error) error {
		return &secretstore.Error{Op: "open", Kind: edgesecrets.ErrInvalid, Err: err}
	}
	tr, err := newTransport(cfg)
	if err != nil {
		return invalid(err)
	}
	var rt http.RoundTripper = tr
	if wrap != nil {
		rt = wrap(rt)
	}
	apiCfg := &api.Config{
		Address: cfg.Address,
		HttpClient: &http.Client{
			Transport: rt,
			// vault/api follows Vault's redirects itself.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		Timeout:    timeout,
		MaxRetries: 0, // secretstore.Store retries, within the caller's deadline
	}
	if cfg.RateLimit > 0 {
		burst := cfg.RateBurst
		if burst == 0 {
			burst = int(math.Ceil(cfg.RateLimit))
		}
		apiCfg.Limiter = rate.NewLimiter(rate.Limit(cfg.RateLimit), burst)
	}
	client, err := api.NewClient(apiCfg)
	if err != nil {
		return invalid(fmt.Errorf("creating the vault client: %w", err))
	}
	// NewClient reads VAULT_TOKEN, VAULT_NAMESPACE and VAULT_HEADERS; the
	// store takes nothing from the environment but what Config names.
	client.ClearToken()
	client.SetHeaders(http.Header{api.RequestHeaderName: []string{"true"}})
	if ns := strings.Trim(cfg.Namespace, "/"); ns != "" {
		client.SetNamespace(ns)
	}
	s.client, s.transport = client, tr
	s.auth, err = newAuthenticator(client, cfg.Auth, log, timeout)
	if err != nil {
		tr.CloseIdleConnections()
		return invalid(err)
	}
	return nil
}

// login logs in the store's own client; a caller's client is left as it is.
func (s *store) login(ctx context.Context) (*api.Secret, error) {
	if s.auth == nil {
		return nil, nil
	}
	return s.auth.first(ctx, s.addr)
}

// closeIdle releases the idle connections of the store's own transport.
func (s *store) closeIdle() {
	if s.transport != nil {
		s.transport.CloseIdleConnections()
	}
}

// newTransport builds the HTTP transport with the configured TLS settings.
func newTransport(cfg Config) (*http.Transport, error) {
	tr := cleanhttp.DefaultPooledTransport()
	tr.ForceAttemptHTTP2 = true
	tr.TLSHandshakeTimeout = 10 * time.Second
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: cfg.TLSServerName}
	bundle := []byte(cfg.CABundle)
	if cfg.CAFile != "" {
		b, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("vault.caFile: %w", err)
		}
		bundle = b
	}
	if len(bundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(bundle) {
			return nil, errors.New("vault.caFile holds no PEM certificate")
		}
		tc.RootCAs = pool
	}
	tr.TLSClientConfig = tc
	return tr, nil
}

// openError turns a driver error of New into the error New returns.
func openError(err error) error {
	var de *secretstore.Error
	if errors.As(err, &de) {
		return &secretstore.Error{Op: "open", Kind: de.Kind, Err: de.Err}
	}
	return &secretstore.Error{Op: "open", Err: err} // a context error
}

// detectKV sets the KV version: the configured one, or for "auto" what
// Vault says the mount runs.
func (s *store) detectKV(ctx context.Context, configured string) error {
	switch configured {
	case kv1:
		s.kv = 1
		return nil
	case kv2:
		s.kv = 2
		return nil
	}
	var sec *api.Secret
	err := s.call(ctx, func(ctx context.Context) (err error) {
		sec, err = s.client.Logical().ReadWithContext(ctx, "sys/internal/ui/mounts/"+s.mount)
		return err
	})
	if err != nil {
		var de *secretstore.Error
		if errors.As(err, &de) && de.Kind != edgesecrets.ErrUnavailable { //nolint:errorlint // kinds are compared as values: the kind itself, not an error chain
			// Vault answers 403 for a mount that does not exist, too.
			de.Err = fmt.Errorf("detecting the KV version of mount %q: the mount does not exist or the token may not use it (set kvVersion to skip detection): %w", s.mount, de.Err)
		}
		return openError(err)
	}
	invalid := func(format string) error {
		return &secretstore.Error{Op: "open", Kind: edgesecrets.ErrInvalid, Err: fmt.Errorf(format, s.mount)}
	}
	if sec == nil || sec.Data == nil {
		return invalid("mount %q not found")
	}
	if typ, _ := sec.Data["type"].(string); typ != "kv" && typ != "generic" {
		return invalid("mount %q is not a KV secrets engine")
	}
	s.kv = 1
	if o, ok := sec.Data["options"].(map[string]any); ok {
		if v, _ := o["version"].(string); v == "2" {
			s.kv = 2
		}
	}
	return nil
}

// call runs one Vault request. A 403 caused by a token that is no longer
// valid leads to one fresh login and one retry. Errors come back as
// *secretstore.Error, or as the context's error.
func (s *store) call(ctx context.Context, fn func(context.Context) error) error {
	gen := uint64(0)
	if s.auth != nil {
		gen = s.auth.generation()
	}
	err := fn(ctx)
	if err != nil && s.auth != nil && isForbidden(err) && ctx.Err() == nil && s.auth.recover(ctx, gen) {
		err = fn(ctx)
	}
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	kind, cause := classify(err, s.addr)
	if kind == edgesecrets.ErrPermission && s.auth != nil { //nolint:errorlint // kinds are compared as values: the kind itself, not an error chain
		if failure := s.auth.tokenFailure(); failure != nil {
			cause = failure // the token, not a policy, is why
		}
	}
	return &secretstore.Error{Kind: kind, Err: cause}
}

// path returns the secret's path inside the mount.
func (s *store) path(name string) string { return joinPath(s.base, name) }

func (s *store) dataPath(name string) string {
	if s.kv == 1 {
		return s.mount + "/" + s.path(name)
	}
	return s.mount + "/data/" + s.path(name)
}

func (s *store) metadataPath(name string) string { return s.mount + "/metadata/" + s.path(name) }

// current is what a read of the data endpoint tells about a secret.
type current struct {
	exists  bool // a live latest version
	data    map[string][]byte
	labels  map[string]string
	version kvVersion // KV v2: the latest version, also when deleted; 0 if none
}

// read reads the secret's data (and, on KV v2, its version and labels).
func (s *store) read(ctx context.Context, name string) (current, error) {
	var sec *api.Secret
	err := s.call(ctx, func(ctx context.Context) (err error) {
		sec, err = s.client.Logical().ReadWithContext(ctx, s.dataPath(name))
		return err
	})
	if err != nil || sec == nil || sec.Data == nil {
		return current{}, err
	}
	if s.kv == 1 {
		return current{exists: true, data: decodeData(sec.Data)}, nil
	}
	md, _ := sec.Data["metadata"].(map[string]any)
	c := current{version: parseVersion(md, 0, time.Now())}
	c.labels = decodeLabels(md["custom_metadata"])
	// Vault decides whether the latest version is deleted: it sends no data
	// for a soft-deleted or destroyed one.
	if data, ok := sec.Data["data"].(map[string]any); ok {
		c.exists = true
		c.data = decodeData(data)
	}
	return c, nil
}

func (c current) secret() *driver.Secret {
	s := &driver.Secret{Data: c.data, Labels: c.labels}
	if c.version.number > 0 {
		s.Version = strconv.Itoa(c.version.number)
		s.UpdatedAt = c.version.createdAt
	}
	return s
}

var errNotFound = &secretstore.Error{Kind: edgesecrets.ErrNotFound}

// Get implements driver.Store with one read of the data endpoint.
func (s *store) Get(ctx context.Context, name string) (*driver.Secret, error) {
	c, err := s.read(ctx, name)
	if err != nil {
		return nil, err
	}
	if !c.exists {
		return nil, errNotFound
	}
	return c.secret(), nil
}

// Stat implements driver.Store. On KV v2 it reads only the metadata
// endpoint; KV v1 has none, so it reads the secret and drops the values.
func (s *store) Stat(ctx context.Context, name string) (*driver.Secret, error) {
	if s.kv == 1 {
		c, err := s.read(ctx, name)
		if err != nil {
			return nil, err
		}
		if !c.exists {
			return nil, errNotFound
		}
		return &driver.Secret{}, nil
	}
	var sec *api.Secret
	err := s.call(ctx, func(ctx context.Context) (err error) {
		sec, err = s.client.Logical().ReadWithContext(ctx, s.metadataPath(name))
		return err
	})
	if err != nil {
		return nil, err
	}
	if sec == nil || sec.Data == nil {
		return nil, errNotFound
	}
	var cur int
	if n, ok := sec.Data["current_version"].(json.Number); ok {
		if i, err := n.Int64(); err == nil {
			cur = int(i)
		}
	}
	versions, _ := sec.Data["versions"].(map[string]any)
	vm, _ := versions[strconv.Itoa(cur)].(map[string]any)
	if cur == 0 || vm == nil {
		return nil, errNotFound
	}
	v := parseVersion(vm, cur, time.Now())
	if v.deleted {
		return nil, errNotFound
	}
	return &driver.Secret{Version: strconv.Itoa(cur), UpdatedAt: v.createdAt, Labels: decodeLabels(sec.Data["custom_metadata"])}, nil
}

// Put implements driver.Store. On KV v2 a data change is one write (with
// check-and-set for IfVersion and CreateOnly) and a label change one
// metadata write, after the data; if that second write fails the error
// says so, and the store's next attempt, or repeating the Put, completes
// it.
func (s *store) Put(ctx context.Context, w *driver.Write) error {
	invalid := func(msg string) error { return &secretstore.Error{Kind: edgesecrets.ErrInvalid, Err: errors.New(msg)} }
	var ifVersion int
	switch {
	case s.kv == 1 && len(w.Labels) > 0:
		return invalid("labels need a KV v2 mount (KV v1 keeps no metadata)")
	case s.kv == 1 && w.IfVersion != "":
		return invalid("IfVersion needs a KV v2 mount (KV v1 keeps no versions)")
	case s.kv == 1 && len(w.Data) == 0:
		return invalid("KV v1 cannot store a secret without keys")
	case w.IfVersion != "":
		n, err := strconv.Atoi(w.IfVersion)
		if err != nil || n <= 0 {
			return invalid("IfVersion is not a KV v2 version number")
		}
		ifVersion = n
	}
	if err := checkLabels(w.Labels); err != nil {
		return &secretstore.Error{Kind: edgesecrets.ErrInvalid, Err: err}
	}
	cur := w.Current
	dataChanged := cur == nil || !edgesecrets.Data(cur.Data).Equal(w.Data)
	labelsChanged := cur == nil && len(w.Labels) > 0 || cur != nil && !maps.Equal(cur.Labels, w.Labels)

	if dataChanged {
		var body map[string]any
		if s.kv == 1 {
			body = encodeData(w.Data)
		} else {
			body = map[string]any{"data": encodeData(w.Data)}
			switch {
			case ifVersion != 0:
				body["options"] = map[string]any{"cas": ifVersion}
			case w.CreateOnly:
				// The latest version number, deleted or not (0 if none): a
				// secret whose latest version is deleted reads as missing.
				latest, err := s.read(ctx, w.Name)
				if err != nil {
					return err
				}
				body["options"] = map[string]any{"cas": latest.version.number}
			}
		}
		err := s.call(ctx, func(ctx context.Context) error {
			_, err := s.client.Logical().WriteWithContext(ctx, s.dataPath(w.Name), body)
			return err
		})
		if err != nil {
			return err
		}
	}
	if labelsChanged {
		labels := make(map[string]any, len(w.Labels))
		for k, v := range w.Labels {
			labels[k] = v
		}
		err := s.call(ctx, func(ctx context.Context) error {
			_, err := s.client.Logical().WriteWithContext(ctx, s.metadataPath(w.Name), map[string]any{"custom_metadata": labels})
			return err
		})
		var de *secretstore.Error
		if dataChanged && errors.As(err, &de) {
			de.Err = fmt.Errorf("data written but labels not (repeat the put): %w", de.Err)
		}
		return err
	}
	return nil
}

// Delete implements driver.Store. On KV v2 it deletes the secret's
// metadata and every version, so the name is gone from List; on KV v1 it
// deletes the entry. Deleting a missing secret succeeds.
func (s *store) Delete(ctx context.Context, name string) error {
	p := s.dataPath(name)
	if s.kv == 2 {
		p = s.metadataPath(name)
	}
	return s.call(ctx, func(ctx context.Context) error {
		_, err := s.client.Logical().DeleteWithContext(ctx, p)
		return err
	})
}

// List implements driver.Store. Vault lists one folder per request, so
// List walks the folders under prefix.
func (s *store) List(ctx context.Context, prefix string) ([]string, error) {
	dir := prefix[:strings.LastIndex(prefix, "/")+1] // "" or ending in "/"
	var names []string
	if err := s.walk(ctx, prefix, dir, &names); err != nil {
		return nil, err
	}
	return names, nil
}

// walk lists folder dir (a scoped name ending in "/", or "") and collects
// the names under it that start with prefix.
func (s *store) walk(ctx context.Context, prefix, dir string, names *[]string) error {
	p := s.mount
	if s.kv == 2 {
		p += "/metadata"
	}
	if full := joinPath(s.base, strings.TrimSuffix(dir, "/")); full != "" {
		p += "/" + full
	}
	var sec *api.Secret
	err := s.call(ctx, func(ctx context.Context) (err error) {
		sec, err = s.client.Logical().ReadWithDataWithContext(ctx, p, map[string][]string{
			"list":            {"true"},
			"exclude_deleted": {"true"}, // KV v2; Vault ignores it elsewhere
		})
		return err
	})
	if err != nil {
		return err
	}
	if sec == nil || sec.Data == nil {
		return nil
	}
	keys, _ := sec.Data["keys"].([]any)
	for _, k := range keys {
		key, _ := k.(string)
		full := dir + key
		if key == "" || !strings.HasPrefix(full, prefix) {
			continue
		}
		if strings.HasSuffix(key, "/") {
			if err := s.walk(ctx, prefix, full, names); err != nil {
				return err
			}
		} else {
			*names = append(*names, full)
		}
	}
	return nil
}

// As implements Store.As: a **api.Client gets the store's client; a
// **store (only this package can name one) the driver itself, for
// AsCaller.
func (s *store) As(target any) bool {
	switch t := target.(type) {
	case **api.Client:
		*t = s.client
		return true
	case **store:
		*t = s
		return true
	}
	return false
}

// maxRequestBytes is Vault's default max_request_size, 32 MiB, the
// largest request body a listener takes unless configured otherwise
// (https://developer.hashicorp.com/vault/docs/configuration/listener/tcp).
const maxRequestBytes = 32 << 20

// MaxValueBytes is the most data a secret may hold: Vault's default
// request size limit (driver.ValueLimiter). A server configured with a
// smaller max_request_size refuses smaller writes itself.
func (s *store) MaxValueBytes() int { return maxRequestBytes }

// Close stops token renewal and releases idle connections; a store of
// AsCaller revokes its caller's token instead. A caller's client is left
// as it is.
func (s *store) Close() error {
	if s.auth != nil {
		s.auth.close()
	}
	if s.revoke {
		s.revokeToken()
	}
	s.closeIdle()
	return nil
}

// joinPath joins non-empty path parts with "/", trimming their slashes.
func joinPath(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p = strings.Trim(p, "/"); p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, "/")
}

// backend registers the store with secretstore.
type backend struct{}

// Validate decodes the vault section and reports every problem in it.
func (backend) Validate(cfg secretstore.Config) error {
	var c Config
	err := cfg.DecodeSection(&c)
	c.Scope = cfg.DefaultScope
	return errors.Join(err, c.validate(false))
}

func (backend) Open(ctx context.Context, cfg secretstore.Config, o secretstore.OpenOptions) (*secretstore.Store, error) {
	var c Config
	if err := cfg.DecodeSection(&c); err != nil {
		return nil, err
	}
	c.Scope = cfg.DefaultScope
	return New(ctx, c, Options{Logger: o.Logger, MeterProvider: o.MeterProvider})
}
