// Package vault is the HashiCorp Vault backend of secretstore, built on the
// official github.com/hashicorp/vault/api client and its api/auth helpers.
//
// It stores each secret as one entry of a KV secrets engine, version 1 or 2
// (Config.KVVersion "auto" asks Vault which). A secret named n lives at
// <mount>/<parentPath>/<defaultScope>/n; names are validated by
// secretstore.ValidateName, so none can escape that prefix.
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
// UpdatedAt zero, a Put with labels or IfVersion fails with ErrInvalid,
// CreateOnly is checked by a read before the write (not atomic), and a
// secret needs at least one key.
//
// Values are bytes: valid UTF-8 is stored as a JSON string, anything else
// as {"edgesecrets:base64": "..."} (see BinaryKey). A Put that would change
// nothing reads the secret and writes nothing.
//
// Errors: 403 is ErrPermission; sealed, standby, unreachable, timeouts,
// 5xx and 429 (after maxRetries) are ErrUnavailable; a lost check-and-set is
// ErrConflict. Messages come from status codes and fixed phrases, never from
// request or response bodies, and never contain a token.
//
// Authentication (token, AppRole, Kubernetes, JWT) happens in New; the token
// is renewed with a LifetimeWatcher, a fresh login follows when renewal
// ends, and a request refused because the token became invalid logs in
// again once and is retried. A token that can no longer be renewed nor
// replaced (one given by value or environment variable past its max TTL,
// a token file nobody updates, a login Vault refuses) is an outage of the
// store: logged at error level once, with its cause, named in the errors
// of refused requests, and reported by Store.CheckCredentials, which asks
// Vault about the token (auth/token/lookup-self). The backend ignores
// VAULT_* environment variables: everything comes from Config.
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
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-cleanhttp"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/hashicorp/vault/api"
	"golang.org/x/time/rate"

	"github.com/edgesecrets/edgesecrets/secretstore"
)

// Type is the name the backend registers under.
const Type = "vault"

var _ secretstore.CredentialChecker = (*Store)(nil)

func init() { secretstore.Register(Type, backend{}) }

// Store is a secretstore.Store on a Vault KV mount, and a
// secretstore.CredentialChecker. It is safe for concurrent use.
type Store struct {
	client    *api.Client
	transport *http.Transport
	auth      *authenticator
	now       func() time.Time
	addr      string
	mount     string
	kv        int               // 1 or 2
	base      secretstore.Scope // parentPath/scope inside the mount
	closed    atomic.Bool
}

// Option configures New.
type Option func(*options)

type options struct {
	log      *slog.Logger
	now      func() time.Time
	wrap     func(http.RoundTripper) http.RoundTripper
	retryMin time.Duration
	retryMax time.Duration
}

// WithLogger makes the store log to l (logins, renewals, failures; never a
// token or a value). Default: discard.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithClock replaces time.Now, used to judge whether a KV v2 deletion_time
// has been reached.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WrapTransport wraps the store's HTTP transport, which already carries the
// configured TLS settings: to count or record requests in tests, or to add
// tracing.
func WrapTransport(wrap func(http.RoundTripper) http.RoundTripper) Option {
	return func(o *options) { o.wrap = wrap }
}

// WithRetryWait sets the wait between retries of a failed request (default
// 1s to 1.5s, vault/api's defaults).
func WithRetryWait(minWait, maxWait time.Duration) Option {
	return func(o *options) { o.retryMin, o.retryMax = minWait, maxWait }
}

// New validates cfg, logs in, detects the KV version when cfg.KVVersion is
// "auto", and returns a ready store. Close it to stop token renewal.
func New(ctx context.Context, cfg Config, opts ...Option) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	o := options{log: slog.New(slog.DiscardHandler), now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	timeout := time.Duration(cfg.Timeout)
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	maxRetries := DefaultMaxRetries
	if cfg.MaxRetries != nil {
		maxRetries = *cfg.MaxRetries
	}
	base, err := secretstore.NewScope(joinPath(cfg.ParentPath, cfg.Scope))
	if err != nil {
		return nil, secretstore.NewError(secretstore.OpOpen, "", secretstore.ErrInvalid, err)
	}
	mount := strings.Trim(cfg.Mount, "/")
	if mount == "" {
		mount = DefaultMount
	}

	tr, err := newTransport(cfg)
	if err != nil {
		return nil, secretstore.NewError(secretstore.OpOpen, "", secretstore.ErrInvalid, err)
	}
	var rt http.RoundTripper = tr
	if o.wrap != nil {
		rt = o.wrap(rt)
	}
	apiCfg := &api.Config{
		Address: cfg.Address,
		HttpClient: &http.Client{
			Transport: rt,
			// vault/api follows Vault's redirects itself.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		Timeout:      timeout,
		MaxRetries:   maxRetries,
		MinRetryWait: o.retryMin,
		MaxRetryWait: o.retryMax,
		Backoff:      retryablehttp.RateLimitLinearJitterBackoff,
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
		return nil, secretstore.NewError(secretstore.OpOpen, "", secretstore.ErrInvalid, fmt.Errorf("creating the vault client: %w", err))
	}
	// NewClient reads VAULT_TOKEN, VAULT_NAMESPACE and VAULT_HEADERS; the
	// store takes nothing from the environment but what Config names.
	client.ClearToken()
	client.SetHeaders(http.Header{api.RequestHeaderName: []string{"true"}})
	if ns := strings.Trim(cfg.Namespace, "/"); ns != "" {
		client.SetNamespace(ns)
	}

	s := &Store{
		client:    client,
		transport: tr,
		now:       o.now,
		addr:      cfg.Address,
		mount:     mount,
		base:      base,
	}
	s.auth, err = newAuthenticator(client, cfg.Auth, o.log, timeout)
	if err != nil {
		return nil, secretstore.NewError(secretstore.OpOpen, "", secretstore.ErrInvalid, err)
	}
	first, err := s.auth.first(ctx, s.addr)
	if err != nil {
		tr.CloseIdleConnections()
		return nil, err
	}
	switch cfg.KVVersion {
	case KV1:
		s.kv = 1
	case KV2:
		s.kv = 2
	default:
		if s.kv, err = s.detectKV(ctx); err != nil {
			tr.CloseIdleConnections()
			return nil, err
		}
	}
	go s.auth.run(first)
	return s, nil
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

// detectKV asks Vault which KV version the mount runs.
func (s *Store) detectKV(ctx context.Context) (int, error) {
	var sec *api.Secret
	err := s.call(ctx, secretstore.OpOpen, "", func(ctx context.Context) (err error) {
		sec, err = s.client.Logical().ReadWithContext(ctx, "sys/internal/ui/mounts/"+s.mount)
		return err
	})
	if err != nil {
		var se *secretstore.Error
		if errors.As(err, &se) && se.Kind != nil && se.Kind != secretstore.ErrUnavailable {
			// Vault answers 403 for a mount that does not exist, too.
			se.Err = fmt.Errorf("detecting the KV version of mount %q: the mount does not exist or the token may not use it (set kvVersion to skip detection): %w", s.mount, se.Err)
		}
		return 0, err
	}
	if sec == nil || sec.Data == nil {
		return 0, secretstore.NewError(secretstore.OpOpen, "", secretstore.ErrInvalid, fmt.Errorf("mount %q not found", s.mount))
	}
	if typ, _ := sec.Data["type"].(string); typ != "kv" && typ != "generic" {
		return 0, secretstore.NewError(secretstore.OpOpen, "", secretstore.ErrInvalid, fmt.Errorf("mount %q is not a KV secrets engine", s.mount))
	}
	if o, ok := sec.Data["options"].(map[string]any); ok {
		if v, _ := o["version"].(string); v == "2" {
			return 2, nil
		}
	}
	return 1, nil
}

// KVVersion returns the KV version of the store's mount, 1 or 2.
func (s *Store) KVVersion() int { return s.kv }

var errClosed = errors.New("store is closed")

// call runs one Vault request for op on name. A 403 caused by a token that
// is no longer valid leads to one fresh login and one retry. Errors come
// back as *secretstore.Error.
func (s *Store) call(ctx context.Context, op, name string, fn func(context.Context) error) error {
	if s.closed.Load() {
		return secretstore.NewError(op, name, secretstore.ErrUnavailable, errClosed)
	}
	if err := ctx.Err(); err != nil {
		return secretstore.NewError(op, name, nil, err)
	}
	gen := s.auth.generation()
	err := fn(ctx)
	if err != nil && isForbidden(err) && ctx.Err() == nil && s.auth.recover(ctx, gen) {
		err = fn(ctx)
	}
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return secretstore.NewError(op, name, nil, ctx.Err())
	}
	kind, cause := classify(err, s.addr)
	if kind == secretstore.ErrPermission {
		if failure := s.auth.tokenFailure(); failure != nil {
			cause = failure // the token, not a policy, is why
		}
	}
	return secretstore.NewError(op, name, kind, cause)
}

// path returns the secret's path inside the mount.
func (s *Store) path(name string) string { return s.base.Path(name) }

func (s *Store) dataPath(name string) string {
	if s.kv == 1 {
		return s.mount + "/" + s.path(name)
	}
	return s.mount + "/data/" + s.path(name)
}

func (s *Store) metadataPath(name string) string { return s.mount + "/metadata/" + s.path(name) }

// current is what a read of the data endpoint tells about a secret.
type current struct {
	exists  bool // a live latest version
	data    secretstore.Data
	labels  map[string]string
	version kvVersion // KV v2: the latest version, also when deleted; 0 if none
}

// read reads the secret's data (and, on KV v2, its version and labels).
func (s *Store) read(ctx context.Context, op, name string) (current, error) {
	var sec *api.Secret
	err := s.call(ctx, op, name, func(ctx context.Context) (err error) {
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
	c := current{version: parseVersion(md, 0, s.now())}
	c.labels = decodeLabels(md["custom_metadata"])
	// Vault decides whether the latest version is deleted: it sends no data
	// for a soft-deleted or destroyed one.
	if data, ok := sec.Data["data"].(map[string]any); ok {
		c.exists = true
		c.data = decodeData(data)
	}
	return c, nil
}

func (c current) secret(name string) *secretstore.Secret {
	s := &secretstore.Secret{Name: name, Data: c.data, Labels: c.labels}
	if c.version.number > 0 {
		s.Version = strconv.Itoa(c.version.number)
		s.UpdatedAt = c.version.createdAt
	}
	return s
}

func notFound(op, name string) error {
	return secretstore.NewError(op, name, secretstore.ErrNotFound, nil)
}

// Get implements secretstore.Store with one read of the data endpoint.
func (s *Store) Get(ctx context.Context, name string) (*secretstore.Secret, error) {
	if err := secretstore.CheckName(secretstore.OpGet, name); err != nil {
		return nil, err
	}
	c, err := s.read(ctx, secretstore.OpGet, name)
	if err != nil {
		return nil, err
	}
	if !c.exists {
		return nil, notFound(secretstore.OpGet, name)
	}
	return c.secret(name), nil
}

// Stat implements secretstore.Store. On KV v2 it reads only the metadata
// endpoint; KV v1 has none, so it reads the secret and drops the values.
func (s *Store) Stat(ctx context.Context, name string) (secretstore.Metadata, error) {
	if err := secretstore.CheckName(secretstore.OpStat, name); err != nil {
		return secretstore.Metadata{}, err
	}
	if s.kv == 1 {
		c, err := s.read(ctx, secretstore.OpStat, name)
		if err != nil {
			return secretstore.Metadata{}, err
		}
		if !c.exists {
			return secretstore.Metadata{}, notFound(secretstore.OpStat, name)
		}
		return secretstore.Metadata{Name: name}, nil
	}
	var sec *api.Secret
	err := s.call(ctx, secretstore.OpStat, name, func(ctx context.Context) (err error) {
		sec, err = s.client.Logical().ReadWithContext(ctx, s.metadataPath(name))
		return err
	})
	if err != nil {
		return secretstore.Metadata{}, err
	}
	if sec == nil || sec.Data == nil {
		return secretstore.Metadata{}, notFound(secretstore.OpStat, name)
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
		return secretstore.Metadata{}, notFound(secretstore.OpStat, name)
	}
	v := parseVersion(vm, cur, s.now())
	if v.deleted {
		return secretstore.Metadata{}, notFound(secretstore.OpStat, name)
	}
	return secretstore.Metadata{
		Name:      name,
		Version:   strconv.Itoa(cur),
		UpdatedAt: v.createdAt,
		Labels:    decodeLabels(sec.Data["custom_metadata"]),
	}, nil
}

// Put implements secretstore.Store. It reads the secret first and writes
// nothing when data and labels are unchanged. On KV v2 a data change is one
// write (with check-and-set for IfVersion and CreateOnly) and a label
// change one metadata write, after the data; if that second write fails the
// error says so and repeating the Put completes it.
func (s *Store) Put(ctx context.Context, in *secretstore.Secret, opts secretstore.PutOptions) (bool, error) {
	if err := secretstore.CheckSecret(in); err != nil {
		return false, err
	}
	const op = secretstore.OpPut
	invalid := func(err error) (bool, error) {
		return false, secretstore.NewError(op, in.Name, secretstore.ErrInvalid, err)
	}
	conflict := func(msg string) (bool, error) {
		return false, secretstore.NewError(op, in.Name, secretstore.ErrConflict, errors.New(msg))
	}
	var ifVersion int
	switch {
	case s.kv == 1 && len(in.Labels) > 0:
		return invalid(errors.New("labels need a KV v2 mount (KV v1 keeps no metadata)"))
	case s.kv == 1 && opts.IfVersion != "":
		return invalid(errors.New("IfVersion needs a KV v2 mount (KV v1 keeps no versions)"))
	case s.kv == 1 && len(in.Data) == 0:
		return invalid(errors.New("KV v1 cannot store a secret without keys"))
	case opts.IfVersion != "":
		n, err := strconv.Atoi(opts.IfVersion)
		if err != nil || n <= 0 {
			return invalid(errors.New("IfVersion is not a KV v2 version number"))
		}
		ifVersion = n
	}
	if err := checkLabels(in.Labels); err != nil {
		return invalid(err)
	}

	cur, err := s.read(ctx, op, in.Name)
	if err != nil {
		return false, err
	}
	dataChanged := !cur.exists || !cur.data.Equal(in.Data)
	labelsChanged := !secretstore.LabelsEqual(cur.labels, in.Labels)
	switch {
	case opts.CreateOnly && cur.exists:
		return conflict("secret exists and the write is create-only")
	case ifVersion != 0 && (!cur.exists || cur.version.number != ifVersion):
		return conflict("current version does not match the expected version")
	case !dataChanged && !labelsChanged:
		return false, nil
	}

	if dataChanged {
		var body map[string]any
		if s.kv == 1 {
			body = encodeData(in.Data)
		} else {
			body = map[string]any{"data": encodeData(in.Data)}
			switch {
			case ifVersion != 0:
				body["options"] = map[string]any{"cas": ifVersion}
			case opts.CreateOnly:
				// The latest version number, deleted or not (0 if none).
				body["options"] = map[string]any{"cas": cur.version.number}
			}
		}
		err := s.call(ctx, op, in.Name, func(ctx context.Context) error {
			_, err := s.client.Logical().WriteWithContext(ctx, s.dataPath(in.Name), body)
			return err
		})
		if err != nil {
			return false, err
		}
	}
	if labelsChanged {
		labels := make(map[string]any, len(in.Labels))
		for k, v := range in.Labels {
			labels[k] = v
		}
		err := s.call(ctx, op, in.Name, func(ctx context.Context) error {
			_, err := s.client.Logical().WriteWithContext(ctx, s.metadataPath(in.Name), map[string]any{"custom_metadata": labels})
			return err
		})
		if err != nil {
			if dataChanged {
				var se *secretstore.Error
				if errors.As(err, &se) {
					se.Err = fmt.Errorf("data written but labels not (repeat the put): %w", se.Err)
				}
			}
			return dataChanged, err
		}
	}
	return true, nil
}

// Delete implements secretstore.Store. On KV v2 it deletes the secret's
// metadata and every version, so the name is gone from List; on KV v1 it
// deletes the entry. Deleting a missing secret succeeds.
func (s *Store) Delete(ctx context.Context, name string) error {
	if err := secretstore.CheckName(secretstore.OpDelete, name); err != nil {
		return err
	}
	p := s.dataPath(name)
	if s.kv == 2 {
		p = s.metadataPath(name)
	}
	return s.call(ctx, secretstore.OpDelete, name, func(ctx context.Context) error {
		_, err := s.client.Logical().DeleteWithContext(ctx, p)
		return err
	})
}

// List implements secretstore.Store. Vault lists one folder per request, so
// List walks the folders under prefix; names come back sorted.
func (s *Store) List(ctx context.Context, prefix string) ([]string, error) {
	if err := secretstore.CheckPrefix(prefix); err != nil {
		return nil, err
	}
	dir := prefix[:strings.LastIndex(prefix, "/")+1] // "" or ending in "/"
	names := []string{}
	if err := s.walk(ctx, prefix, dir, &names); err != nil {
		return nil, err
	}
	slices.Sort(names)
	return names, nil
}

// walk lists folder dir (relative to the scope, "" or ending in "/") and
// collects the names under it that start with prefix.
func (s *Store) walk(ctx context.Context, prefix, dir string, names *[]string) error {
	p := s.mount
	if s.kv == 2 {
		p += "/metadata"
	}
	if full := joinPath(string(s.base), strings.TrimSuffix(dir, "/")); full != "" {
		p += "/" + full
	}
	var sec *api.Secret
	err := s.call(ctx, secretstore.OpList, prefix, func(ctx context.Context) (err error) {
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

// Close stops token renewal and releases idle connections. Later calls
// fail with ErrUnavailable. Close is safe to call more than once.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	s.auth.close()
	s.transport.CloseIdleConnections()
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

func (backend) decode(cfg secretstore.Config) (Config, error) {
	var c Config
	if err := cfg.DecodeSection(&c); err != nil {
		return c, err
	}
	c.Scope = cfg.DefaultScope
	return c, nil
}

func (b backend) Validate(cfg secretstore.Config) error {
	c, err := b.decode(cfg)
	if err != nil {
		return err
	}
	return c.Validate()
}

func (b backend) Open(ctx context.Context, cfg secretstore.Config, o secretstore.OpenOptions) (secretstore.Store, error) {
	c, err := b.decode(cfg)
	if err != nil {
		return nil, secretstore.NewError(secretstore.OpOpen, "", secretstore.ErrInvalid, err)
	}
	return New(ctx, c, WithLogger(o.Logger))
}
