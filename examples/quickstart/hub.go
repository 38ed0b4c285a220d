package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// org is the Open Horizon organisation everything in the demo belongs to.
const org = "myorg"

// demoSecret is one secret of the demo: the vault secret name a binding
// uses, the service secret name (its file name on the node), and the
// content the admin last wrote, kept to check what the service receives.
// The content is never printed.
type demoSecret struct {
	vault   string // vault secret name, relative to the organisation
	service string // service secret name
	format  string // "json" or "raw", as the service definition declares
	data    edgesecrets.Data
}

// storeName is the secret's name in the store: vault secret names live
// under "<org>/" (binding.VaultSecretName.StorePath).
func (s *demoSecret) storeName() string { return org + "/" + s.vault }

// demoSecrets are what the service of serviceDefinition declares and
// goodPolicy binds, with fresh values.
func demoSecrets(value func() string) []*demoSecret {
	return []*demoSecret{
		{vault: "db/web-login", service: "db", format: "json",
			data: edgesecrets.Data{"username": []byte("app"), "password": []byte(value())}},
		{vault: "user/alice/api-token", service: "api_token", format: "raw",
			data: edgesecrets.Data{"token": []byte(value())}},
	}
}

// admin is the vault administrator. It writes secrets straight to the
// store (in production with Vault's or AWS's own tools); only the agbot
// reads them.
type admin struct {
	store   *secretstore.Store
	say     *narrator
	mu      sync.Mutex
	written map[string]bool // store names to delete at clean-up
}

func (a *admin) write(ctx context.Context, s *demoSecret, opts secretstore.PutOptions) (secretstore.Metadata, error) {
	a.mu.Lock()
	a.written[s.storeName()] = true
	a.mu.Unlock()
	if _, err := a.store.Put(ctx, &secretstore.Secret{Name: s.storeName(), Data: s.data, Labels: map[string]string{"owner": "quickstart"}}, opts); err != nil {
		return secretstore.Metadata{}, err
	}
	return a.store.Stat(ctx, s.storeName())
}

// cleanUp deletes whatever the admin wrote that is still there, so a run
// against a real store leaves nothing behind.
func (a *admin) cleanUp(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var errs []error
	for name := range a.written {
		errs = append(errs, a.store.Delete(ctx, name))
	}
	return errors.Join(errs...)
}

// provider is the party that launched the node (a cloud, a factory
// installer) and vouches for it: it hands the agent an attestation
// document, and confirms to the identity issuer that it made it
// (identity.IssuerOptions.Attest, the Copper Argos model).
type provider struct {
	name   string
	mu     sync.Mutex
	issued map[string]string // instance id → document
}

func (p *provider) attestation(instanceID, document string) identity.Attestation {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.issued[instanceID] = document
	return identity.Attestation(document)
}

// Attest is the identity issuer's attestor. Its error is logged by the hub
// and never sent back; it does not quote the document.
func (p *provider) Attest(_ context.Context, req identity.AttestationRequest) (time.Time, error) {
	p.mu.Lock()
	want, ok := p.issued[req.Instance.InstanceID]
	p.mu.Unlock()
	if !ok || subtle.ConstantTimeCompare([]byte(want), []byte(req.Attestation)) != 1 {
		return time.Time{}, fmt.Errorf("provider %s issued no such document for instance %s", p.name, req.Instance.InstanceID)
	}
	return time.Now(), nil
}

// startHub opens the store, and starts the identity issuer and the agbot
// with its delivery engine.
func (f *flow) startHub(ctx context.Context) (err error) {
	// The run's files: the agbot's delivery state, the agent's secrets.
	f.workDir, err = os.MkdirTemp(f.opts.WorkDir, "edgesecrets-quickstart-")
	if err != nil {
		return err
	}
	store, err := secretstore.Open(ctx, f.storeConfig, secretstore.OpenOptions{Logger: f.opts.Logger.With("component", "store")})
	if err != nil {
		return err
	}
	f.admin = &admin{store: store, say: f.say, written: map[string]bool{}}

	f.provider = &provider{name: "quickstart-provider", issued: map[string]string{}}

	// The exchange holds the published service definitions the agbot and
	// deployers resolve.
	catalog, err := publishService()
	if err != nil {
		return err
	}
	f.deployerPassword = f.value()
	f.agbot, err = newAgbot(agbotOptions{
		store:        store,
		attest:       f.provider.Attest,
		resolver:     catalog,
		authenticate: basicAuthenticator(deployerUser, f.deployerPassword),
		dir:          filepath.Join(f.workDir, "agbot"),
		say:          f.say,
		logger:       f.opts.Logger,
	})
	if err != nil {
		return err
	}
	f.exchange = newExchange(f.agbot.Handler(), f.opts.OnEnvelope, f.say)
	f.deployer, err = newDeployer(f.agbot.api.URL, catalog, f.client, f.deployerPassword, f.say, f.opts.Logger)
	if err != nil {
		return err
	}
	f.goBackground("agbot", f.agbot.Run)
	f.say.sayf("hub", "opened a %q store (scope %q); agbot API at %s (secrets, identity, relay); its delivery engine polls the store every %s and keeps its state and the identity records in %s",
		f.storeConfig.Type, f.storeConfig.DefaultScope, f.agbot.api.URL, watchInterval, stateFile)
	return nil
}

// writeSecrets is the admin writing the secrets the service will need.
func (f *flow) writeSecrets(ctx context.Context) error {
	f.secrets = demoSecrets(f.value)
	for _, s := range f.secrets {
		md, err := f.admin.write(ctx, s, secretstore.PutOptions{})
		if err != nil {
			return err
		}
		f.say.sayf("admin", "wrote %s (keys %s), version %s", s.storeName(), strings.Join(s.data.Keys(), ", "), md.Version)
	}
	return nil
}

// rotate is the admin writing a new password, compare-and-set on the
// version it read so a concurrent writer is not overwritten.
func (f *flow) rotate(ctx context.Context) error {
	s := f.secrets[0]
	old, err := f.desired(ctx, s.service)
	if err != nil {
		return err
	}
	before, err := f.admin.store.Stat(ctx, s.storeName())
	if err != nil {
		return err
	}
	s.data = s.data.Clone()
	s.data["password"] = []byte(f.value())
	after, err := f.admin.write(ctx, s, secretstore.PutOptions{IfVersion: before.Version})
	if err != nil {
		return err
	}
	f.say.sayf("admin", "rotated the password of %s: version %s -> %s (compare-and-set)", s.storeName(), before.Version, after.Version)

	// The engine's watcher notices within its interval: the desired
	// content of the agreement's "db" secret changes, and the engine seals
	// an update with the value it reads at send time and sends it until
	// the agent acknowledges it.
	if err := waitFor(ctx, "the engine to see the new content", func() (bool, error) {
		desired, err := f.desired(ctx, s.service)
		return desired.Tag != old.Tag, err
	}); err != nil {
		return err
	}
	if _, err := f.agbot.waitInSync(ctx, f.agreementID); err != nil {
		return err
	}
	f.say.sayf("agbot", "engine: its watcher saw new content of %s; %s is in sync again: the agent acknowledged it as %s", s.storeName(), f.agreementID, s.service)
	return nil
}

// desired returns the content the engine wants the agent of the flow's
// agreement to hold for one service secret.
func (f *flow) desired(ctx context.Context, service string) (state.Content, error) {
	st, err := f.agbot.Engine().Status(ctx, f.agreementID)
	if err != nil {
		return state.Content{}, err
	}
	for _, sl := range st.Slots {
		if sl.Name == service {
			return sl.Desired, nil
		}
	}
	return state.Content{}, fmt.Errorf("agreement %s has no secret %s", f.agreementID, service)
}

// deleteSecret is the admin deleting the rotated secret: the engine's
// watcher sees it gone, the engine decides the cancellation (its cancel
// hook is called) and sends it to the agent until acknowledged, and the
// agent wipes the service's files.
func (f *flow) deleteSecret(ctx context.Context) error {
	s := f.secrets[0]
	mount := f.service.mount
	if err := f.admin.store.Delete(ctx, s.storeName()); err != nil {
		return err
	}
	f.say.sayf("admin", "deleted %s", s.storeName())
	if err := waitFor(ctx, "the agreement to be cancelled", func() (bool, error) {
		return f.agent.cancelled(f.agreementID) && f.agbot.hooked(f.agreementID), nil
	}); err != nil {
		return err
	}
	// Once the agent acknowledged the cancellation, the engine forgets
	// the agreement.
	wctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	if _, err := f.agbot.Engine().Wait(wctx, f.agreementID); !errors.Is(err, state.ErrNotFound) {
		return fmt.Errorf("the engine still holds %s after the agent wiped it: %v", f.agreementID, err)
	}
	f.say.sayf("agbot", "engine: the agent acknowledged the cancellation; %s is forgotten", f.agreementID)
	return f.service.checkGone(ctx, mount)
}
