package vault

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/vault/api"
	"github.com/hashicorp/vault/api/auth/approle"
	"github.com/hashicorp/vault/api/auth/kubernetes"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// loginFunc obtains a token and sets it on the client. The returned
// secret's Auth carries the token's lease (duration, renewable).
type loginFunc func(ctx context.Context, c *api.Client) (*api.Secret, error)

// authenticator keeps the client's token valid: it renews it with a
// LifetimeWatcher, logs in again when renewal ends, and logs in again once
// when a request is refused because the token is no longer valid.
//
// It also knows when the token has become unusable for good, and why: a
// token given by value or environment variable past the end of its life,
// or any token Vault refuses while no fresh login succeeds. That is an
// outage of the store: logged at error level once when it starts (and at
// info when it ends), reported by Store.CheckCredentials and named in the
// errors of refused requests. Messages name where the token came from,
// never the token.
type authenticator struct {
	client     *api.Client
	log        *slog.Logger
	method     string
	mount      string // the auth method's mount; "" for method token
	source     string // where the token comes from, for messages
	login      loginFunc
	canRelogin bool          // a fresh login can yield a different token
	timeout    time.Duration // per login attempt

	mu    sync.Mutex    // serialises logins
	gen   atomic.Uint64 // bumped by every successful login
	fresh chan *api.Secret
	stop  chan struct{}
	done  chan struct{}

	hmu      sync.Mutex
	expires  time.Time // when the current token's lease ends; zero: never
	ended    string    // why renewal ended, for a token that cannot be replaced
	failure  error     // why the token is unusable; nil while it works
	failedAt time.Time // the last failed login of recover or the renewal loop
}

// reloginPause is how long after a failed login a refused request skips
// trying again itself: with thousands of names refused in one watch
// cycle, each would otherwise cost a lookup and a login.
const reloginPause = 5 * time.Second

// expiryMargin is added to a token's computed end before it is declared
// expired: Vault counts TTLs in whole seconds.
const expiryMargin = time.Second

// tokenError is the cause of the errors of a store whose token is
// unusable.
type tokenError struct{ msg string }

func (e *tokenError) Error() string { return e.msg }

func newAuthenticator(c *api.Client, a Auth, log *slog.Logger, timeout time.Duration) (*authenticator, error) {
	au := &authenticator{
		client:  c,
		log:     log.With("auth", a.Method),
		method:  a.Method,
		timeout: timeout,
		fresh:   make(chan *api.Secret, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	mount := a.Mount
	if mount == "" {
		mount = a.Method
	}
	mount = strings.Trim(mount, "/")
	if a.Method != methodToken {
		au.mount = mount
	}
	au.canRelogin = true
	au.source = "the token of the " + a.Method + " login"
	switch a.Method {
	case methodToken:
		au.canRelogin = a.TokenFile != ""
		au.login = tokenLogin(a)
		switch {
		case a.TokenFile != "":
			au.source = "the token from file " + a.TokenFile
		case a.TokenEnv != "":
			au.source = "the token from environment variable " + a.TokenEnv
		default:
			au.source = "the token given in auth.token"
		}
	case methodAppRole:
		au.login = appRoleLogin(a, mount)
	case methodKubernetes:
		au.login = kubernetesLogin(a, mount)
	case methodJWT:
		au.login = jwtLogin(a, mount)
	case methodOpenHorizon:
		au.login = openHorizonLogin(a, mount)
		au.source = "the token of the openhorizon login of " + a.ExchangeID
	default:
		return nil, fmt.Errorf("unknown auth method %q", a.Method)
	}
	return au, nil
}

// readCredential reads a credential from a literal, a file or an
// environment variable (the one that is set), trimming surrounding space.
// Errors name the field and the file or variable, never the value.
func readCredential(field string, literal edgesecrets.Sensitive, file, env string) (string, error) {
	switch {
	case literal != "":
		return string(literal), nil
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("auth.%sFile: %w", field, err)
		}
		v := strings.TrimSpace(string(b))
		if v == "" {
			return "", fmt.Errorf("auth.%sFile: %s is empty", field, file)
		}
		return v, nil
	case env != "":
		v := strings.TrimSpace(os.Getenv(env))
		if v == "" {
			return "", fmt.Errorf("auth.%sEnv: environment variable %s is empty or unset", field, env)
		}
		return v, nil
	}
	return "", fmt.Errorf("auth: no %s configured", field)
}

// credentialError marks a failure to read a local credential, as opposed
// to Vault refusing it.
type credentialError struct{ err error }

func (e *credentialError) Error() string { return e.err.Error() }
func (e *credentialError) Unwrap() error { return e.err }

func tokenLogin(a Auth) loginFunc {
	return func(ctx context.Context, c *api.Client) (*api.Secret, error) {
		tok, err := readCredential("token", a.Token, a.TokenFile, a.TokenEnv)
		if err != nil {
			return nil, &credentialError{err}
		}
		c.SetToken(tok)
		// Look the token up to learn its lease, so the watcher can renew it.
		info, err := c.Auth().Token().LookupSelfWithContext(ctx)
		if err != nil {
			return nil, err
		}
		out := &api.Secret{Auth: &api.SecretAuth{ClientToken: tok}}
		if info != nil {
			if ttl, err := info.TokenTTL(); err == nil {
				out.Auth.LeaseDuration = int(ttl / time.Second)
			}
			out.Auth.Renewable, _ = info.TokenIsRenewable()
		}
		return out, nil
	}
}

func appRoleLogin(a Auth, mount string) loginFunc {
	return func(ctx context.Context, c *api.Client) (*api.Secret, error) {
		secretID, err := readCredential("secretID", a.SecretID, a.SecretIDFile, a.SecretIDEnv)
		if err != nil {
			return nil, &credentialError{err}
		}
		opts := []approle.LoginOption{approle.WithMountPath(mount)}
		if a.WrappedSecretID {
			opts = append(opts, approle.WithWrappingToken())
		}
		m, err := approle.NewAppRoleAuth(a.RoleID, &approle.SecretID{FromString: secretID}, opts...)
		if err != nil {
			return nil, &credentialError{errors.New("auth: approle settings rejected by the client library")}
		}
		return c.Auth().Login(ctx, m)
	}
}

func kubernetesLogin(a Auth, mount string) loginFunc {
	file := a.ServiceAccountTokenFile
	if file == "" {
		file = defaultServiceAccountTokenFile
	}
	return func(ctx context.Context, c *api.Client) (*api.Secret, error) {
		// Read the token at every login: projected service account tokens
		// rotate.
		jwt, err := readCredential("serviceAccountToken", "", file, "")
		if err != nil {
			return nil, &credentialError{err}
		}
		m, err := kubernetes.NewKubernetesAuth(a.Role, kubernetes.WithMountPath(mount), kubernetes.WithServiceAccountToken(jwt))
		if err != nil {
			return nil, &credentialError{errors.New("auth: kubernetes settings rejected by the client library")}
		}
		return c.Auth().Login(ctx, m)
	}
}

// jwtMethod logs in to Vault's JWT/OIDC auth method with a JWT, an
// api.AuthMethod of our own: vault/api ships no JWT helper module.
type jwtMethod struct {
	mount, role, jwt string
}

// Login implements api.AuthMethod.
func (m *jwtMethod) Login(ctx context.Context, c *api.Client) (*api.Secret, error) {
	body := map[string]any{"jwt": m.jwt}
	if m.role != "" {
		body["role"] = m.role
	}
	return c.Logical().WriteWithContext(ctx, "auth/"+m.mount+"/login", body)
}

func jwtLogin(a Auth, mount string) loginFunc {
	return func(ctx context.Context, c *api.Client) (*api.Secret, error) {
		jwt, err := readCredential("jwt", "", a.JWTFile, a.JWTEnv)
		if err != nil {
			return nil, &credentialError{err}
		}
		return c.Auth().Login(ctx, &jwtMethod{mount: mount, role: a.Role, jwt: jwt})
	}
}

// openHorizonMethod logs in to Open Horizon's auth method
// (vault-exchange-auth) with an exchange identity and its token or
// password, as anax's Vault plugin does: POST auth/<mount>/login
// {"id": "org/id", "token": "..."}.
type openHorizonMethod struct {
	mount, id, token string
}

// Login implements api.AuthMethod.
func (m *openHorizonMethod) Login(ctx context.Context, c *api.Client) (*api.Secret, error) {
	return c.Logical().WriteWithContext(ctx, "auth/"+m.mount+"/login", map[string]any{"id": m.id, "token": m.token})
}

func openHorizonLogin(a Auth, mount string) loginFunc {
	return func(ctx context.Context, c *api.Client) (*api.Secret, error) {
		tok, err := readCredential("exchangeToken", a.ExchangeToken, a.ExchangeTokenFile, a.ExchangeTokenEnv)
		if err != nil {
			return nil, &credentialError{err}
		}
		return c.Auth().Login(ctx, &openHorizonMethod{mount: mount, id: a.ExchangeID, token: tok})
	}
}

// first logs in for New. Errors are *secretstore.Error of kind
// ErrPermission (Vault refused the credentials), ErrInvalid (a local
// credential is missing) or ErrUnavailable.
func (a *authenticator) first(ctx context.Context, addr string) (*api.Secret, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, err := a.loginLocked(ctx)
	if err != nil {
		return nil, loginError(ctx, err, addr, a.method, a.mount)
	}
	return s, nil
}

// loginError builds the error for a failed login.
func loginError(ctx context.Context, err error, addr, method, mount string) error {
	if ctx.Err() != nil {
		return &secretstore.Error{Op: "open", Err: ctx.Err()}
	}
	kind, cause := loginCause(err, addr, method, mount)
	return &secretstore.Error{Op: "open", Kind: kind, Err: cause}
}

// LoginError is the cause of a login that Vault refused with an HTTP 4xx
// answer: a bad role, secret ID, JWT or exchange credential, or a token
// Vault no longer accepts. Errors carrying it match
// edgesecrets.ErrPermission; errors.As finds it. It never holds a
// credential.
type LoginError struct {
	// Method is the auth method: "openhorizon", "approle", "jwt",
	// "kubernetes" or "token".
	Method string
	// Mount is the auth method's mount path ("openhorizon" for
	// auth/openhorizon); empty for method token, which has none.
	Mount string
	// StatusCode is the HTTP status Vault answered with: 400 or 403 as a
	// rule (vault-exchange-auth refuses an unknown identity or a wrong
	// token or password with 403).
	StatusCode int
}

// Error returns "vault refused the login (method <m> at auth/<mount>, HTTP
// <status>)".
func (e *LoginError) Error() string {
	where := ""
	if e.Mount != "" {
		where = " at auth/" + e.Mount
	}
	return fmt.Sprintf("vault refused the login (method %s%s, HTTP %d)", e.Method, where, e.StatusCode)
}

// loginCause classifies a failed login: ErrInvalid when a local credential
// could not be read, ErrPermission with a *LoginError when Vault refused
// it, ErrUnavailable otherwise. The cause is safe to print.
func loginCause(err error, addr, method, mount string) (kind, cause error) {
	var ce *credentialError
	if errors.As(err, &ce) {
		return edgesecrets.ErrInvalid, ce.err
	}
	kind, cause = classify(err, addr)
	var se *statusError
	if errors.As(cause, &se) && se.StatusCode >= 400 && se.StatusCode < 500 {
		kind = edgesecrets.ErrPermission
		cause = &LoginError{Method: method, Mount: mount, StatusCode: se.StatusCode}
	}
	return kind, fmt.Errorf("login: %w", cause)
}

// loginLocked logs in and bumps the generation; a.mu must be held.
func (a *authenticator) loginLocked(ctx context.Context) (*api.Secret, error) {
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	s, err := a.login(ctx, a.client)
	if err != nil {
		return nil, err
	}
	if s == nil || s.Auth == nil {
		return nil, errors.New("login returned no token")
	}
	a.gen.Add(1)
	a.log.Info("vault login succeeded", "ttl", time.Duration(s.Auth.LeaseDuration)*time.Second, "renewable", s.Auth.Renewable)
	a.leased(s.Auth.LeaseDuration)
	return s, nil
}

// leased notes that the current token was just issued or renewed for
// lease seconds (0: it never expires), so it is usable.
func (a *authenticator) leased(lease int) {
	a.hmu.Lock()
	defer a.hmu.Unlock()
	a.expires = time.Time{}
	if lease > 0 {
		a.expires = time.Now().Add(time.Duration(lease) * time.Second)
	}
	a.ended = ""
	a.recoveredLocked()
}

// recovered notes that Vault accepts the current token.
func (a *authenticator) recovered() {
	a.hmu.Lock()
	defer a.hmu.Unlock()
	a.recoveredLocked()
}

func (a *authenticator) recoveredLocked() {
	if a.failure != nil {
		a.failure = nil
		a.log.Info("vault token usable again")
	}
}

// fail notes that the token is unusable, because of cause. The first
// failure after a working token is logged at error level; later ones
// only replace the cause.
func (a *authenticator) fail(cause error) {
	a.hmu.Lock()
	defer a.hmu.Unlock()
	if a.failure == nil {
		a.log.Error("vault token unusable: every request is refused until it is replaced", "cause", cause.Error())
	} else {
		a.log.Debug("vault token still unusable", "cause", cause.Error())
	}
	a.failure = cause
}

// tokenFailure returns why the token is unusable, or nil.
func (a *authenticator) tokenFailure() error {
	a.hmu.Lock()
	defer a.hmu.Unlock()
	return a.failure
}

// expired reports whether the current token's lease has ended.
func (a *authenticator) expired() bool {
	a.hmu.Lock()
	defer a.hmu.Unlock()
	return !a.expires.IsZero() && time.Now().After(a.expires.Add(expiryMargin))
}

// deadCause is the cause for a token that Vault no longer accepts and
// that cannot be replaced (given by value or environment variable).
func (a *authenticator) deadCause() error {
	a.hmu.Lock()
	why := a.ended
	a.hmu.Unlock()
	if why == "" {
		why = "it expired or was revoked"
	}
	return &tokenError{fmt.Sprintf("vault no longer accepts %s (%s), and a token given this way cannot be renewed or replaced "+
		"while running: restart with a new token, or use auth.tokenFile (re-read when the token ends) or a login method", a.source, why)}
}

// reloginCause is the cause for a token that Vault no longer accepts
// while logging in again fails with err.
func (a *authenticator) reloginCause(err error) error {
	_, cause := loginCause(err, a.client.Address(), a.method, a.mount)
	return &tokenError{fmt.Sprintf("vault no longer accepts %s, and logging in again failed: %v", a.source, cause)}
}

// loginFailed records a failed login of the renewal loop or of recover
// at attempt time, and declares the token unusable when its lease has
// ended too (before that, the token in use still works).
func (a *authenticator) loginFailed(err error, tokenRefused bool) {
	a.hmu.Lock()
	a.failedAt = time.Now()
	a.hmu.Unlock()
	if tokenRefused || a.expired() {
		a.fail(a.reloginCause(err))
	}
}

// pausing reports whether a failed login is so recent that recover should
// not try again, because the token is already known unusable.
func (a *authenticator) pausing() bool {
	a.hmu.Lock()
	defer a.hmu.Unlock()
	return a.failure != nil && time.Since(a.failedAt) < reloginPause
}

// generation identifies the current token; recover compares it to tell
// whether another caller already logged in again.
func (a *authenticator) generation() uint64 { return a.gen.Load() }

// recover is called after a request made with token generation gen got a
// 403. If the token is no longer valid it logs in again and reports true,
// so the caller retries once; a genuine permission denial reports false.
func (a *authenticator) recover(ctx context.Context, gen uint64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.gen.Load() != gen {
		return true // someone logged in meanwhile; retry with the new token
	}
	if !a.canRelogin && a.tokenFailure() != nil {
		return false // known dead, and nothing can replace it
	}
	if a.canRelogin && a.pausing() {
		return false
	}
	if _, err := a.client.Auth().Token().LookupSelfWithContext(ctx); err == nil || !isForbidden(err) {
		return false // the token is fine: the 403 is about the path
	}
	if !a.canRelogin {
		a.fail(a.deadCause())
		return false
	}
	a.log.Info("vault token no longer valid; logging in again")
	s, err := a.loginLocked(ctx)
	if err != nil {
		if ctx.Err() == nil {
			a.loginFailed(err, true)
		}
		return false
	}
	select { // replace any login the watcher loop has not picked up yet
	case <-a.fresh:
	default:
	}
	a.fresh <- s
	return true
}

// run keeps the token alive until stop is closed.
func (a *authenticator) run(s *api.Secret) {
	defer close(a.done)
	for {
		renewable := s.Auth.Renewable
		var w *api.LifetimeWatcher
		var doneCh <-chan error
		var renewCh <-chan *api.RenewOutput
		if s.Auth.LeaseDuration > 0 {
			var err error
			w, err = a.client.NewLifetimeWatcher(&api.LifetimeWatcherInput{Secret: s})
			if err == nil {
				go w.Start()
				doneCh, renewCh = w.DoneCh(), w.RenewCh()
			}
		}
		next, ok := a.watch(doneCh, renewCh, renewable)
		if w != nil {
			w.Stop()
		}
		if !ok {
			return
		}
		s = next
	}
}

// watch waits for the current token's renewal to end (then logs in again),
// a login by recover, or stop. It returns the new login, or false on stop.
// A token that cannot be replaced is declared unusable when its lease
// ends.
func (a *authenticator) watch(doneCh <-chan error, renewCh <-chan *api.RenewOutput, renewable bool) (*api.Secret, bool) {
	var expiry <-chan time.Time
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		select {
		case <-a.stop:
			return nil, false
		case s := <-a.fresh:
			return s, true
		case r := <-renewCh:
			if r != nil && r.Secret != nil && r.Secret.Auth != nil {
				a.log.Debug("vault token renewed", "ttl", time.Duration(r.Secret.Auth.LeaseDuration)*time.Second)
				a.leased(r.Secret.Auth.LeaseDuration)
			}
		case <-expiry:
			expiry = nil
			a.fail(a.deadCause())
		case err := <-doneCh:
			if !a.canRelogin {
				// A literal or environment token cannot change in-process:
				// when its lease ends, the store is out of service.
				doneCh, renewCh = nil, nil
				why := "it expired at its max TTL"
				switch {
				case !renewable:
					why = "it expired and is not renewable"
				case err != nil:
					why = "it expired after renewing it failed"
				}
				a.hmu.Lock()
				a.ended = why
				expires := a.expires
				a.hmu.Unlock()
				a.log.Warn("vault token renewal ended and the token cannot be replaced (use auth.tokenFile or a login method)",
					"why", why, "expires", expires)
				if !expires.IsZero() {
					timer = time.NewTimer(time.Until(expires.Add(expiryMargin)))
					expiry = timer.C
				}
				continue
			}
			if err != nil {
				kind, cause := classify(err, a.client.Address())
				a.log.Info("vault token renewal failed; logging in again", "kind", kind, "cause", cause)
			} else {
				a.log.Info("vault token reached the end of its renewable life; logging in again")
			}
			return a.reloginUntilDone()
		}
	}
}

// reloginUntilDone logs in again, retrying with backoff until it succeeds
// or stop is closed.
func (a *authenticator) reloginUntilDone() (*api.Secret, bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-a.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	prev := a.client.Token()
	wait := time.Second
	// The first trouble is a warning; repeats are debug: the failure
	// itself, once the token has ended, is logged by fail.
	level := slog.LevelWarn
	for {
		a.mu.Lock()
		s, err := a.loginLocked(ctx)
		a.mu.Unlock()
		switch {
		case err != nil && ctx.Err() != nil:
		case err != nil:
			a.log.Log(ctx, level, "vault login failed; retrying", "error", loginError(ctx, err, a.client.Address(), a.method, a.mount), "in", wait)
			a.loginFailed(err, false)
			level = slog.LevelDebug
		case a.method == methodToken && s.Auth.ClientToken == prev:
			// The token file still holds the expiring token; wait for
			// whoever maintains it rather than spin on it.
			a.log.Log(ctx, level, "vault token file not yet updated; checking again", "in", wait)
			level = slog.LevelDebug
		default:
			return s, true
		}
		select {
		case <-a.stop:
			return nil, false
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Minute)
	}
}

// close stops the renewal loop and waits for it.
func (a *authenticator) close() {
	close(a.stop)
	<-a.done
}
