package agbotsecrets

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/open-horizon/anax/agreementbot/secrets"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/ohsecret"
	"github.com/edgesecrets/edgesecrets/secretsapi"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// vaultName is a vault secret name (or directory) of an organisation with
// its store name (for a directory, the store prefix ending in "/").
type vaultName struct {
	binding.VaultSecretName
	store string
}

// secretName parses the path anax passes for one secret: a vault secret
// name relative to org ("db/password", "user/<u>/<name>", ...).
func secretName(org, path string) (vaultName, error) {
	n, err := binding.ParseVaultSecretName(path)
	if err != nil {
		return vaultName{}, err
	}
	store, err := n.StorePath(org)
	if err != nil {
		return vaultName{}, err
	}
	return vaultName{VaultSecretName: n, store: store}, nil
}

// dirProbe completes a directory into a name, so that directories are
// read with the rules of names.
const dirProbe = "x"

// dirName parses the path anax passes for a directory: "" (the
// organisation), "user/<u>", "node/<n>", "user/<u>/node/<n>" or a folder
// of organisation secrets.
func dirName(org, path string) (vaultName, error) {
	n, err := binding.ParseVaultSecretName(strings.TrimSuffix(path, "/") + "/" + dirProbe)
	if path == "" {
		n, err = binding.VaultSecretName{Secret: dirProbe}, nil
	}
	if err != nil {
		return vaultName{}, err
	}
	store, err := n.StorePath(org)
	if err != nil {
		return vaultName{}, err
	}
	n.Secret = strings.TrimSuffix(strings.TrimSuffix(n.Secret, dirProbe), "/")
	return vaultName{VaultSecretName: n, store: strings.TrimSuffix(store, dirProbe)}, nil
}

// secretPath is the SecretPath of anax's errors for a path of org: the
// store's name. anax's secure API shows none of them to the user.
func secretPath(org, path string) string {
	if path == "" {
		return org + "/"
	}
	return org + "/" + path
}

// fullName is anax's name of a secret by its parts (vault.go
// GetSecretDetails).
func fullName(secretUser, secretNode, name string) string {
	switch {
	case secretUser != "" && secretNode != "":
		return "user/" + secretUser + "/node/" + secretNode + "/" + name
	case secretUser != "":
		return "user/" + secretUser + "/" + name
	case secretNode != "":
		return "node/" + secretNode + "/" + name
	}
	return name
}

// ListOrgSecret tells whether an organisation secret exists (nil) or not
// (NoSecretFound), as the user sees it.
func (p *Plugin) ListOrgSecret(user, token, org, path string) error {
	return p.exists(user, token, org, path)
}

// ListOrgUserSecret tells whether a user secret, path "user/<u>/<name>",
// exists.
func (p *Plugin) ListOrgUserSecret(user, token, org, path string) error {
	return p.exists(user, token, org, path)
}

// ListOrgNodeSecret tells whether a node's organisation secret, path
// "node/<n>/<name>", exists.
func (p *Plugin) ListOrgNodeSecret(user, token, org, path string) error {
	return p.exists(user, token, org, path)
}

// ListUserNodeSecret tells whether a user's node secret, path
// "user/<u>/node/<n>/<name>", exists.
func (p *Plugin) ListUserNodeSecret(user, token, org, path string) error {
	return p.exists(user, token, org, path)
}

// exists is the existence check of the List*Secret methods.
func (p *Plugin) exists(user, token, org, path string) error {
	ctx, cancel := p.ctx()
	defer cancel()
	a, err := p.asUser(ctx, user, token)
	if err != nil {
		return err
	}
	defer a.done()
	_, err = p.stat(ctx, a, user, org, path)
	return err
}

// stat finds the secret at path as the user sees it, as anax's Vault
// plugin reads its metadata: a bad name, a refusal or a missing secret is
// the error anax's plugin gives for that GET.
func (p *Plugin) stat(ctx context.Context, a *access, user, org, path string) (vaultName, error) {
	n, err := secretName(org, path)
	if err != nil {
		return vaultName{}, badName(methodGet, secretPath(org, path), err)
	}
	if !a.allowed(org, n, secretsapi.ActionExists) {
		return vaultName{}, denied(methodGet, n.store, user)
	}
	if _, err := a.store.Stat(ctx, n.store); err != nil {
		return vaultName{}, p.storeError(err, methodGet, n.store, user)
	}
	return n, nil
}

// listMode is how a listing presents its names.
type listMode int

const (
	// listOrg: names relative to the organisation, without user/ and
	// node/ at the top (vault.go listSecrets filters them out).
	listOrg listMode = iota + 1
	// listAll: every name relative to the organisation.
	listAll
	// listTrimmed: names relative to the listed directory.
	listTrimmed
)

// ListAllSecrets lists every secret of the organisation the user may
// list, organisation, node and user secrets, relative to the
// organisation.
func (p *Plugin) ListAllSecrets(user, token, org, path string) ([]string, error) {
	return p.list(user, token, org, path, listAll)
}

// ListOrgSecrets lists the organisation's secrets under path ("" for
// all), relative to the organisation, without those under user/ and node/.
func (p *Plugin) ListOrgSecrets(user, token, org, path string) ([]string, error) {
	return p.list(user, token, org, path, listOrg)
}

// ListOrgUserSecrets lists a user's secrets, path "user/<u>", relative to
// it.
func (p *Plugin) ListOrgUserSecrets(user, token, org, path string) ([]string, error) {
	return p.list(user, token, org, path, listTrimmed)
}

// ListOrgNodeSecrets lists a node's organisation secrets, path
// "node/<node>", relative to it.
func (p *Plugin) ListOrgNodeSecrets(user, token, org, _, path string) ([]string, error) {
	return p.list(user, token, org, path, listTrimmed)
}

// ListUserNodeSecrets lists a user's secrets for a node, path
// "user/<u>/node/<node>", relative to it.
func (p *Plugin) ListUserNodeSecrets(user, token, org, _, path string) ([]string, error) {
	return p.list(user, token, org, path, listTrimmed)
}

// list lists a directory as the user. An empty directory is NoSecretFound
// (Vault answers 404), which anax's secure API turns into an empty list.
func (p *Plugin) list(user, token, org, path string, mode listMode) ([]string, error) {
	ctx, cancel := p.ctx()
	defer cancel()
	a, err := p.asUser(ctx, user, token)
	if err != nil {
		return nil, err
	}
	defer a.done()
	d, err := dirName(org, path)
	if err != nil {
		return nil, badName(methodList, secretPath(org, path), err)
	}
	if !a.allowed(org, d, secretsapi.ActionList) {
		return nil, denied(methodList, d.store, user)
	}
	full, found, err := p.listTree(ctx, a, d.store, path == "" && mode == listOrg)
	if err != nil {
		return nil, p.storeError(err, methodList, d.store, user)
	}
	if !found {
		return nil, &secrets.NoSecretFound{Response: vaultResponse(), SecretPath: d.store}
	}
	names := make([]string, 0, len(full))
	for _, s := range full {
		rel := strings.TrimPrefix(s, org+"/")
		switch {
		case mode == listOrg && path == "" && (strings.HasPrefix(rel, "user/") || strings.HasPrefix(rel, "node/")):
			continue
		case mode == listAll && a.caller != nil:
			// The policy decides name by name what the user may list.
			n, err := binding.ParseVaultSecretName(rel)
			if err != nil || !secretsapi.Authorize(*a.caller, org, n, secretsapi.ActionList) {
				continue
			}
		case mode == listTrimmed:
			rel = strings.TrimPrefix(rel, path+"/")
		}
		names = append(names, rel)
	}
	return names, nil
}

// probeChar starts a List prefix that matches no name of a folder, so
// that listing it asks the store for the folder alone.
const probeChar = "~"

// listTree lists the names under the store prefix dir as the user: all of
// them when the store lets the user list the whole tree; on Vault, when
// its ACL refuses part of it, folder by folder as anax's Vault plugin
// lists (vault.go gatherSecretNames): a folder the user may not list is
// left out, and only the listed folder's own refusal is an error. found
// reports whether the directory exists (Vault answers 404 otherwise).
// skipOwn leaves out the top's user/ and node/ folders, which anax's
// plugin does not descend into for the organisation's own listing.
func (p *Plugin) listTree(ctx context.Context, a *access, dir string, skipOwn bool) (names []string, found bool, err error) {
	names, err = a.store.List(ctx, dir)
	switch {
	case err == nil:
		return names, len(names) > 0, nil
	case a.caller != nil || !errors.Is(err, edgesecrets.ErrPermission):
		return nil, false, err
	}
	refused := err
	// The agbot may list everything: its listing tells the folders; the
	// user's own requests decide what is shown.
	agbot := p.agbotStore()
	all, aerr := agbot.List(ctx, dir)
	if aerr != nil || len(all) == 0 {
		return nil, false, refused
	}
	leaves, folders := children(dir, all)
	probe := probeChar
	for hasPrefixed(leaves, folders, probe) {
		probe += probeChar
	}
	// The folder itself: a prefix matching none of its names makes the
	// store list the folder and nothing below it.
	if _, err := a.store.List(ctx, dir+probe); err != nil {
		return nil, false, err
	}
	names = names[:0]
	for _, l := range leaves {
		names = append(names, dir+l)
	}
	for _, f := range folders {
		if skipOwn && (f == "user" || f == "node") {
			continue
		}
		sub, _, err := p.listTree(ctx, a, dir+f+"/", false)
		switch {
		case err == nil:
			names = append(names, sub...)
		case !errors.Is(err, edgesecrets.ErrPermission):
			return nil, false, err
		}
	}
	slices.Sort(names)
	return names, true, nil
}

// children returns the names directly in folder dir and its sub-folders,
// sorted, from names under it.
func children(dir string, names []string) (leaves, folders []string) {
	for _, n := range names {
		rest := strings.TrimPrefix(n, dir)
		if first, _, deeper := strings.Cut(rest, "/"); deeper {
			folders = append(folders, first)
		} else {
			leaves = append(leaves, rest)
		}
	}
	slices.Sort(folders)
	return leaves, slices.Compact(folders)
}

// hasPrefixed reports whether any leaf or folder starts with probe.
func hasPrefixed(leaves, folders []string, probe string) bool {
	return slices.ContainsFunc(leaves, func(s string) bool { return strings.HasPrefix(s, probe) }) ||
		slices.ContainsFunc(folders, func(s string) bool { return strings.HasPrefix(s, probe) })
}

// CreateOrgSecret writes an organisation secret.
func (p *Plugin) CreateOrgSecret(user, token, org, path string, data secrets.SecretDetails) error {
	return p.create(user, token, org, path, data)
}

// CreateOrgUserSecret writes a user secret, path "user/<u>/<name>".
func (p *Plugin) CreateOrgUserSecret(user, token, org, path string, data secrets.SecretDetails) error {
	return p.create(user, token, org, path, data)
}

// CreateOrgNodeSecret writes a node's organisation secret, path
// "node/<n>/<name>".
func (p *Plugin) CreateOrgNodeSecret(user, token, org, path string, data secrets.SecretDetails) error {
	return p.create(user, token, org, path, data)
}

// CreateUserNodeSecret writes a user's node secret, path
// "user/<u>/node/<n>/<name>".
func (p *Plugin) CreateUserNodeSecret(user, token, org, path string, data secrets.SecretDetails) error {
	return p.create(user, token, org, path, data)
}

// create writes {key, value} as the secret's data, keeping its labels
// (Vault custom_metadata, AWS tags).
func (p *Plugin) create(user, token, org, path string, data secrets.SecretDetails) error {
	ctx, cancel := p.ctx()
	defer cancel()
	a, err := p.asUser(ctx, user, token)
	if err != nil {
		return err
	}
	defer a.done()
	n, err := secretName(org, path)
	if err != nil {
		return badName(methodPost, secretPath(org, path), err)
	}
	if !a.allowed(org, n, secretsapi.ActionWrite) {
		return denied(methodPost, n.store, user)
	}
	var labels map[string]string
	md, err := a.store.Stat(ctx, n.store)
	switch {
	case err == nil:
		labels = md.Labels
	case !errors.Is(err, edgesecrets.ErrNotFound):
		return p.writeError(err, n.store, user, data)
	}
	sec := &secretstore.Secret{Name: n.store, Data: ohsecret.Details{Key: data.Key, Value: data.Value}.Data(), Labels: labels}
	if _, err := a.store.Put(ctx, sec, secretstore.PutOptions{}); err != nil {
		return p.writeError(err, n.store, user, data)
	}
	p.log.Info("secret written", "secret", n.store, "user", user)
	return nil
}

// writeError is storeError for a write; a BadRequest carries the request
// body as anax's does, with the value masked as anax's SecretDetails
// prints it, since anax logs the error.
func (p *Plugin) writeError(err error, name, user string, data secrets.SecretDetails) error {
	e := p.storeError(err, methodPost, name, user)
	var br *secrets.BadRequest
	if errors.As(e, &br) {
		br.RequestBody = &secrets.SecretDetails{Key: data.Key, Value: "********"}
	}
	return e
}

// DeleteOrgSecret deletes an organisation secret.
func (p *Plugin) DeleteOrgSecret(user, token, org, path string) error {
	return p.delete(user, token, org, path)
}

// DeleteOrgUserSecret deletes a user secret, path "user/<u>/<name>".
func (p *Plugin) DeleteOrgUserSecret(user, token, org, path string) error {
	return p.delete(user, token, org, path)
}

// DeleteOrgNodeSecret deletes a node's organisation secret, path
// "node/<n>/<name>".
func (p *Plugin) DeleteOrgNodeSecret(user, token, org, path string) error {
	return p.delete(user, token, org, path)
}

// DeleteUserNodeSecret deletes a user's node secret, path
// "user/<u>/node/<n>/<name>".
func (p *Plugin) DeleteUserNodeSecret(user, token, org, path string) error {
	return p.delete(user, token, org, path)
}

// delete removes a secret; a missing one is NoSecretFound, as anax's
// Vault plugin checks existence first.
func (p *Plugin) delete(user, token, org, path string) error {
	ctx, cancel := p.ctx()
	defer cancel()
	a, err := p.asUser(ctx, user, token)
	if err != nil {
		return err
	}
	defer a.done()
	n, err := p.stat(ctx, a, user, org, path)
	if err != nil {
		return err
	}
	if !a.allowed(org, n, secretsapi.ActionDelete) {
		return denied(methodDelete, n.store, user)
	}
	if err := a.store.Delete(ctx, n.store); err != nil {
		return p.storeError(err, methodDelete, n.store, user)
	}
	p.log.Info("secret deleted", "secret", n.store, "user", user)
	return nil
}

// isAgbot reports whether user and token are the agbot's own exchange
// credentials.
func (p *Plugin) isAgbot(user, token string) bool {
	return p.opts.AgbotID != "" && user == p.opts.AgbotID &&
		subtle.ConstantTimeCompare([]byte(token), []byte(p.opts.AgbotToken)) == 1
}

// requiredArgs checks GetSecretDetails' and GetSecretMetadata's arguments
// as anax's Vault plugin does, with its messages.
func requiredArgs(org, name, method string) error {
	msg := ""
	switch {
	case org == "":
		msg = "Organization name must not be an empty string"
	case name == "":
		msg = "Secret name must not be an empty string"
	default:
		return nil
	}
	return &secrets.BadRequest{ResponseCode: http.StatusBadRequest, Response: vaultResponse(msg), HttpMethod: method}
}

// GetSecretDetails reads a secret as Open Horizon's {key, value}
// (ohsecret.FromData of its data): with the agbot's store when user and
// token are the agbot's, else as the user.
func (p *Plugin) GetSecretDetails(user, token, org, secretUser, secretNode, name string) (secrets.SecretDetails, error) {
	if err := requiredArgs(org, name, ""); err != nil {
		return secrets.SecretDetails{}, err
	}
	ctx, cancel := p.ctx()
	defer cancel()
	path := fullName(secretUser, secretNode, name)
	a := &access{store: p.agbotStore(), user: user, done: func() {}}
	if !p.isAgbot(user, token) {
		var err error
		if a, err = p.asUser(ctx, user, token); err != nil {
			return secrets.SecretDetails{}, err
		}
	} else if a.store == nil {
		return secrets.SecretDetails{}, &secrets.SecretsProviderUnavailable{ProviderError: errors.New("the secrets plugin is not logged in to the secret store")}
	}
	defer a.done()
	n, err := secretName(org, path)
	if err != nil {
		return secrets.SecretDetails{}, badName(methodGet, secretPath(org, path), err)
	}
	if !a.allowed(org, n, secretsapi.ActionRead) {
		return secrets.SecretDetails{}, denied(methodGet, n.store, user)
	}
	s, err := a.store.Get(ctx, n.store)
	if err != nil {
		return secrets.SecretDetails{}, p.storeError(err, methodGet, n.store, user)
	}
	d, err := ohsecret.FromData(s.Data)
	if err != nil {
		// FromData's errors name keys, never values.
		return secrets.SecretDetails{}, &secrets.InvalidResponse{ParseError: err, HttpMethod: methodGet, SecretPath: n.store}
	}
	p.log.Debug("secret read", "secret", n.store, "user", user)
	return secrets.SecretDetails{Key: d.Key, Value: d.Value}, nil
}

// GetSecretMetadata returns a secret's times with the agbot's store: the
// change clock's (see the package documentation), so that anax's secret
// updater sees every change of content.
func (p *Plugin) GetSecretMetadata(org, secretUser, secretNode, name string) (secrets.SecretMetadata, error) {
	if err := requiredArgs(org, name, methodGet); err != nil {
		return secrets.SecretMetadata{}, err
	}
	ctx, cancel := p.ctx()
	defer cancel()
	path := fullName(secretUser, secretNode, name)
	n, err := secretName(org, path)
	if err != nil {
		return secrets.SecretMetadata{}, badName(methodGet, secretPath(org, path), err)
	}
	st := p.agbotStore()
	if st == nil {
		return secrets.SecretMetadata{}, &secrets.SecretsProviderUnavailable{ProviderError: errors.New("the secrets plugin is not logged in to the secret store")}
	}
	tag, at, err := revision(ctx, st, n.store)
	if errors.Is(err, edgesecrets.ErrNotFound) {
		if cerr := p.clock.absent(n.store, time.Now()); cerr != nil {
			p.log.Error("the change clock could not note a missing secret", "secret", n.store, "err", cerr)
		}
	}
	if err != nil {
		return secrets.SecretMetadata{}, p.storeError(err, methodGet, n.store, secretUser)
	}
	created, updated, err := p.clock.observe(n.store, tag, at, time.Now())
	switch {
	case errors.Is(err, errTooLate):
		return secrets.SecretMetadata{}, &secrets.Unknown{Response: vaultResponse(err.Error()), ResponseCode: http.StatusInternalServerError, HttpMethod: methodGet, SecretPath: n.store}
	case err != nil:
		// The times are right in this process; the file catches up at the
		// next observation.
		p.log.Error("the change clock could not be saved", "secret", n.store, "err", err)
	}
	return secrets.SecretMetadata{CreationTime: created, UpdateTime: updated}, nil
}

// revision returns the content tag of a secret's current revision and the
// store's time of it: from its metadata when the store keeps versions
// (Vault KV v2, AWS, memory), else from reading it (KV v1).
func revision(ctx context.Context, st *secretstore.Store, name string) (secretstore.ContentTag, time.Time, error) {
	md, err := st.Stat(ctx, name)
	if err != nil {
		return secretstore.ContentTag{}, time.Time{}, err
	}
	if md.Version != "" {
		return (&secretstore.Secret{Version: md.Version}).ContentTag(), md.UpdatedAt, nil
	}
	s, err := st.Get(ctx, name)
	if err != nil {
		return secretstore.ContentTag{}, time.Time{}, err
	}
	return s.ContentTag(), s.UpdatedAt, nil
}
