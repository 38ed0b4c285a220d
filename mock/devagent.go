package mock

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
)

// DevAgentOptions configures a DevAgent.
type DevAgentOptions struct {
	// SecretFiles are local files, one per service secret, as given to Open
	// Horizon's `hzn dev service start --secret <file>`: a file's base name
	// is the service secret name, and its bytes are, unchanged, the content
	// of the file the service finds under /open-horizon-secrets and the
	// details GET /secrets/{name} returns.
	SecretFiles []string
	// InstanceID is the service instance's id, its HTTP Basic user id.
	// Default: "dev-service".
	InstanceID string
	// Token is the instance's HTTP Basic token. Default: a random one.
	Token edgesecrets.Sensitive
	// Dir is the storage root. Default: a new temporary directory that
	// Close removes.
	Dir string
	// Addr is the address the API listens on. Default: "127.0.0.1:0" (a free
	// loopback port).
	Addr string
	// GroupReadable and Group make the mount readable by a non-root
	// container in that group (see agentapi.Instance).
	GroupReadable bool
	Group         int
	// StatusFiles enables the SECRETS_PROVIDED and SECRETS_UPDATED files.
	StatusFiles bool
	// Logger receives the store's and handler's logs (names, never
	// values). Default: discard.
	Logger *slog.Logger
}

// DevAgent is a stand-in for a node agent, for service developers testing
// without a hub: it stores one service instance's secrets from local files
// with the real agentapi.Store and serves the real /secrets API for it on
// a local port. A test simulates the hub rotating a secret with
// UpdateSecret and a container restart with
// Store.ServiceRestarted(ctx, InstanceID).
//
// Its fields are set by NewDevAgent and are for reading; changing them
// changes nothing. Printing a DevAgent or its options (fmt with every verb,
// slog, encoding/json) never shows the token.
type DevAgent struct {
	// URL is the base URL of the API, for example "http://127.0.0.1:41234";
	// the service calls URL+"/secrets".
	URL string
	// InstanceID is the instance id: the HTTP Basic user id; Token returns
	// the token.
	InstanceID string
	// MountSource is the directory to bind-mount read-only at
	// /open-horizon-secrets in the service's container.
	MountSource string
	// StatusDir is the directory of the status files (see
	// DevAgentOptions.StatusFiles).
	StatusDir string
	// Handler is the /secrets API handler, to serve it elsewhere as well
	// (on a Unix socket, say).
	Handler http.Handler `json:"-"`
	// Store is the underlying store, for what the fields and methods here
	// do not cover: Store.ServiceRestarted(ctx, InstanceID) simulates a
	// restart of the service's container (the updated list is cleared and
	// GET /secrets answers 404).
	Store *agentapi.Store `json:"-"`

	store     *agentapi.Store
	server    *http.Server
	listener  net.Listener
	serveDone chan struct{}
	id        string
	token     edgesecrets.Sensitive
	tempDir   string // removed by Close; "" when the caller gave Dir
	closeOnce sync.Once
	closeErr  error
}

// devAgentAgreement and devAgentOrg name the agreement and service the dev
// agent's instance belongs to.
const (
	devAgentAgreement = "dev-agreement"
	devAgentOrg       = "dev"
)

// NewDevAgent stores the secret files as one service instance and starts
// serving the /secrets API. Close it when done.
func NewDevAgent(ctx context.Context, opts DevAgentOptions) (_ *DevAgent, err error) {
	if opts.InstanceID == "" {
		opts.InstanceID = "dev-service"
	}
	if opts.Token == "" {
		opts.Token = edgesecrets.Sensitive(rand.Text())
	}
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	secrets, err := devAgentReadFiles(opts.SecretFiles)
	if err != nil {
		return nil, err
	}
	a := &DevAgent{InstanceID: opts.InstanceID, id: opts.InstanceID, token: opts.Token, serveDone: make(chan struct{})}
	defer func() {
		if err != nil {
			// The error being returned says what went wrong; a failure to
			// clean up after it is joined to it.
			err = errors.Join(err, a.cleanup(ctx))
		}
	}()
	dir := opts.Dir
	if dir == "" {
		if a.tempDir, err = os.MkdirTemp("", "edgesecrets-devagent-"); err != nil {
			return nil, fmt.Errorf("mock: dev agent: %w", err)
		}
		dir = filepath.Join(a.tempDir, "secrets")
	}
	if a.store, err = agentapi.Open(ctx, agentapi.Options{Root: dir, StatusFiles: opts.StatusFiles, Logger: opts.Logger}); err != nil {
		return nil, fmt.Errorf("mock: dev agent: %w", err)
	}
	ref := a.service()
	proposal := agreement.Proposal{AgreementID: devAgentAgreement,
		Services: []agreement.ServiceSecrets{{Service: ref, Secrets: secrets}}}
	instance := agentapi.Instance{ID: opts.InstanceID, GroupReadable: opts.GroupReadable, Group: opts.Group}
	if _, err = a.store.ApplyProposal(ctx, proposal, agentapi.Instances{ref: instance}); err != nil {
		return nil, fmt.Errorf("mock: dev agent: %w", err)
	}
	tokens := &agentapi.TokenTable{}
	if err = tokens.Set(opts.InstanceID, string(opts.Token)); err != nil {
		return nil, fmt.Errorf("mock: dev agent: %w", err)
	}
	handler, err := agentapi.NewHandler(a.store, agentapi.HandlerOptions{
		Authenticate: tokens.Authenticate, Logger: opts.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("mock: dev agent: %w", err)
	}
	if a.listener, err = net.Listen("tcp", opts.Addr); err != nil {
		return nil, fmt.Errorf("mock: dev agent: %w", err)
	}
	// The settings agentapi's documentation asks of every /secrets server.
	a.server = &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10}
	go func() {
		defer close(a.serveDone)
		if err := a.server.Serve(a.listener); !errors.Is(err, http.ErrServerClosed) && opts.Logger != nil {
			opts.Logger.Error("dev agent: serving stopped", "err", err)
		}
	}()
	a.URL = "http://" + a.listener.Addr().String()
	a.Handler = handler
	a.Store = a.store
	info, _ := a.store.Instance(a.id)
	a.MountSource, a.StatusDir = info.MountSource, info.StatusDir
	return a, nil
}

// devAgentReadFiles reads the secret files into raw-format secrets named
// after the files.
func devAgentReadFiles(paths []string) (map[string]agreement.SecretDetails, error) {
	secrets := make(map[string]agreement.SecretDetails, len(paths))
	for _, p := range paths {
		name := filepath.Base(p)
		if err := agreement.CheckSecretName(name); err != nil {
			return nil, fmt.Errorf("mock: dev agent: secret file %q: %w: %w", p, edgesecrets.ErrInvalid, err)
		}
		if _, dup := secrets[name]; dup {
			return nil, fmt.Errorf("mock: dev agent: %w: two secret files are named %q", edgesecrets.ErrInvalid, name)
		}
		content, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("mock: dev agent: %w", err)
		}
		secrets[name] = devAgentSecret(content)
	}
	return secrets, nil
}

// devAgentSecret is a raw secret: the file holds content unchanged.
func devAgentSecret(content []byte) agreement.SecretDetails {
	return agreement.SecretDetails{Format: agreement.FormatRaw, Data: edgesecrets.Data{"content": content}}
}

// Token returns the instance's HTTP Basic token.
func (a *DevAgent) Token() string { return string(a.token) }

func (a *DevAgent) service() agreement.ServiceRef {
	return agreement.ServiceRef{Org: devAgentOrg, URL: a.id}
}

// UpdateSecret simulates the hub updating the service secret name to
// content, as an agreement update would: the file is rewritten and GET
// /secrets lists name until the service acknowledges it. It reports whether
// the content changed; the error matches edgesecrets.ErrNotFound when the
// service has no such secret.
func (a *DevAgent) UpdateSecret(ctx context.Context, name string, content []byte) (changed bool, err error) {
	u, err := agreement.NewSecretsUpdate(devAgentAgreement, agreement.SecretsUpdate{Services: []agreement.ServiceSecrets{{
		Service: a.service(), Secrets: map[string]agreement.SecretDetails{name: devAgentSecret(content)},
	}}})
	if err != nil {
		return false, fmt.Errorf("mock: dev agent: %w", err)
	}
	changes, err := a.store.ApplyUpdate(ctx, u)
	if err != nil {
		return false, fmt.Errorf("mock: dev agent: %w", err)
	}
	return len(changes[a.id]) > 0, nil
}

// Close stops the API, wipes and removes the instance's files, closes the
// store, and removes the temporary directory it created. Calling it again
// returns the first call's result.
func (a *DevAgent) Close() error {
	a.closeOnce.Do(func() { a.closeErr = a.cleanup(context.Background()) })
	return a.closeErr
}

func (a *DevAgent) cleanup(ctx context.Context) error {
	var errs []error
	if a.server != nil {
		errs = append(errs, a.server.Close())
		<-a.serveDone
	} else if a.listener != nil {
		errs = append(errs, a.listener.Close())
	}
	if a.store != nil {
		errs = append(errs, a.store.Remove(ctx, a.id), a.store.Close())
	}
	if a.tempDir != "" {
		errs = append(errs, os.RemoveAll(a.tempDir))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("mock: dev agent: close: %w", err)
	}
	return nil
}
