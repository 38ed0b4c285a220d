package secretsapi

import (
	"errors"
	"fmt"
	"strings"

	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/internal/safename"
)

// target is what an Open Horizon secrets-manager path names: a directory
// of secrets (dir: name has Scope, User and Node set and Secret empty;
// all: every secret of the organisation) or one secret.
type target struct {
	org  string
	all  bool
	dir  bool
	name binding.VaultSecretName
}

// String returns the name or directory as the caller wrote it, for
// messages: "db/password", "user/alice/", "" (the organisation).
func (t target) String() string { return t.name.String() }

// errNoRoute marks a path that is not one of the API's routes (404); every
// other parse error is a bad name or organisation (400).
var errNoRoute = errors.New("no such route")

// probe completes a directory path into a name, so that directories are
// read with the same rules as names (binding.ParseVaultSecretName).
const probe = "x"

// parseOrgPath reads a path under OrgPath:
//
//	/org/{org}/allsecrets
//	/org/{org}/secrets                                  directory: the organisation's secrets
//	/org/{org}/secrets/user/{user}[/node/{node}]        directory: a user's (node) secrets
//	/org/{org}/secrets/node/{node}                      directory: a node's organisation secrets
//	/org/{org}/secrets/{vault secret name}              one secret, any scope
//
// as anax's router has them (agreementbot/secure_api.go lines 195-203).
// Names follow binding.ParseVaultSecretName, which accepts more characters
// than anax's route pattern [\w/-]+, and must make a store name under
// the organisation (VaultSecretName.StorePath): the parser accepts what
// the store accepts, by the same rule (secretstore.ValidateName). A parse
// error's text has no percent sign (refusalText): it is sent to the client.
func parseOrgPath(p string) (target, error) {
	t, err := parseOrgTarget(p)
	if err != nil && !errors.Is(err, errNoRoute) {
		return target{}, refusalError{err}
	}
	return t, err
}

// parseOrgTarget is parseOrgPath, with the parse errors as they come.
func parseOrgTarget(p string) (target, error) {
	rest, ok := strings.CutPrefix(p, OrgPath)
	if !ok {
		return target{}, errNoRoute
	}
	org, rest, _ := strings.Cut(rest, "/")
	kind, rest, hasRest := strings.Cut(rest, "/")
	switch {
	case kind == "allsecrets" && !hasRest:
	case kind == "secrets":
	default:
		return target{}, errNoRoute
	}
	if err := safename.Check(org); err != nil {
		return target{}, fmt.Errorf("organisation %w", err)
	}
	t := target{org: org, all: kind == "allsecrets"}
	switch {
	case t.all, !hasRest:
		t.dir = true
		return t, nil
	case rest == "":
		return target{}, errors.New("the secret name is empty")
	}
	n, err := binding.ParseVaultSecretName(rest)
	if err == nil {
		// The store's rule decides, with the organisation in front:
		// what parses here is what the store takes.
		if _, err := n.StorePath(org); err != nil {
			return target{}, err
		}
		t.name = n
		return t, nil
	}
	// Not a name; perhaps a directory: "user/<u>", "node/<n>",
	// "user/<u>/node/<n>" each make a name with one more segment.
	d, derr := binding.ParseVaultSecretName(rest + "/" + probe)
	if derr != nil || (d.User == "" && d.Node == "") || d.Secret != probe {
		return target{}, err
	}
	if _, derr := d.StorePath(org); derr != nil {
		return target{}, derr
	}
	d.Secret = ""
	t.dir, t.name = true, d
	return t, nil
}

// storePrefix is the store path prefix of a directory target: "<org>/",
// "<org>/user/<u>/", "<org>/node/<n>/" or "<org>/user/<u>/node/<n>/".
func (t target) storePrefix() string {
	return t.org + "/" + t.name.String()
}
