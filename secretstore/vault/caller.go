package vault

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// DefaultCallerMount is where Open Horizon's deployments mount
// vault-exchange-auth, the auth method AsCaller logs in through.
const DefaultCallerMount = methodOpenHorizon

// revokeTimeout bounds the best-effort revocation of a caller's token at
// Close.
const revokeTimeout = 5 * time.Second

// Caller is an Open Horizon exchange identity a request runs as.
type Caller struct {
	// ID is the exchange identity, "org/id": a user's or an agbot's, as
	// anax's agbot passes it to its secrets plugin.
	ID string
	// Token is the identity's password or token.
	Token edgesecrets.Sensitive
	// Mount is vault-exchange-auth's mount path; default "openhorizon".
	Mount string
}

// AsCaller logs c in to Vault through Open Horizon's auth method
// (auth/<c.Mount>/login, vault-exchange-auth) and returns a store that
// acts with c's token: the same server, TLS settings, namespace, KV mount
// and version, parent path and scope as st, so Vault's ACL policy for c
// decides each request, as anax's own Vault plugin has it. A request the
// policy refuses fails with edgesecrets.ErrPermission.
//
// It costs one request (the login): the KV version is st's, and the
// connections are st's. The store it returns is meant for one request: its
// token is not renewed (vault-exchange-auth gives users a two-minute,
// non-renewable token) and not replaced when it ends. Close it when done:
// Close revokes the token, best effort.
//
// A login Vault refuses (an unknown identity, a wrong token or password)
// is an error matching edgesecrets.ErrPermission whose cause is a
// *LoginError with Vault's HTTP status; an unreachable Vault matches
// edgesecrets.ErrUnavailable; a malformed c matches edgesecrets.ErrInvalid.
// A store not on this backend gives an error matching
// errors.ErrUnsupported.
func AsCaller(ctx context.Context, st *secretstore.Store, c Caller) (*secretstore.Store, error) {
	var parent *store
	if st == nil || !st.As(&parent) {
		return nil, &secretstore.Error{Op: "open", Err: fmt.Errorf("vault.AsCaller needs a store of the vault backend: %w", errors.ErrUnsupported)}
	}
	d, err := parent.asCaller(ctx, c)
	if err != nil {
		return nil, err
	}
	out, err := secretstore.New(d, secretstore.Options{Scope: parent.scope, MaxAttempts: parent.attempts, Backend: backendType, MeterProvider: parent.meter})
	if err != nil {
		_ = d.Close()
		return nil, err
	}
	return out, nil
}

// asCaller logs c in with a copy of s's client and returns a driver on it.
func (s *store) asCaller(ctx context.Context, c Caller) (*store, error) {
	invalid := func(err error) error { return &secretstore.Error{Op: "open", Kind: edgesecrets.ErrInvalid, Err: err} }
	mount := c.Mount
	if mount == "" {
		mount = DefaultCallerMount
	}
	switch {
	case checkExchangeID(c.ID) != nil:
		return nil, invalid(fmt.Errorf("caller id: %w", checkExchangeID(c.ID)))
	case c.Token == "":
		return nil, invalid(fmt.Errorf("caller %s: no token", c.ID))
	case validPath(mount) != nil:
		return nil, invalid(fmt.Errorf("caller mount: %w", validPath(mount)))
	}
	mount = strings.Trim(mount, "/")
	// A copy shares the HTTP client (connections, TLS), the rate limiter
	// and the headers (namespace); the token is the caller's alone.
	client, err := s.client.CloneWithHeaders()
	if err != nil {
		return nil, invalid(fmt.Errorf("copying the vault client: %w", err))
	}
	client.ClearToken()
	m := &openHorizonMethod{mount: mount, id: c.ID, token: string(c.Token)}
	sec, err := m.Login(ctx, client)
	if err != nil {
		return nil, loginError(ctx, err, s.addr, methodOpenHorizon, mount)
	}
	if sec == nil || sec.Auth == nil || sec.Auth.ClientToken == "" {
		return nil, &secretstore.Error{Op: "open", Kind: edgesecrets.ErrUnavailable, Err: errors.New("login: vault answered without a token")}
	}
	client.SetToken(sec.Auth.ClientToken)
	return &store{
		client: client, addr: s.addr, mount: s.mount, kv: s.kv, base: s.base,
		scope: s.scope, attempts: s.attempts, meter: s.meter, revoke: true,
	}, nil
}

// revokeToken revokes the store's token, best effort: it expires anyway.
func (s *store) revokeToken() {
	ctx, cancel := context.WithTimeout(context.Background(), revokeTimeout)
	defer cancel()
	_ = s.client.Auth().Token().RevokeSelfWithContext(ctx, "")
	s.client.ClearToken()
}
