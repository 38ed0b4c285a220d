package secretsapi

import (
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/safename"
)

// Role is what a caller is in its organisation; it decides what the policy
// lets it do (see the package documentation, "Authorization").
type Role int

const (
	// RoleUser is an exchange user of the organisation.
	RoleUser Role = iota + 1
	// RoleAdmin is an organisation administrator (an exchange user with
	// "admin": true).
	RoleAdmin
	// RoleNode is a node of the organisation. Nodes receive their secrets
	// through agreements, never through this API: the policy grants them
	// nothing.
	RoleNode
)

// String returns "user", "admin" or "node".
func (r Role) String() string {
	switch r {
	case RoleUser:
		return "user"
	case RoleAdmin:
		return "admin"
	case RoleNode:
		return "node"
	}
	return "Role(" + strconv.Itoa(int(r)) + ")"
}

// Caller is who Options.Authenticate found a request to come from.
type Caller struct {
	// Org is the caller's organisation. A caller may only use the secrets
	// of its own organisation.
	Org string
	// ID is the user or node id within Org, without the organisation. A
	// user's own secrets are "user/<ID>/...".
	ID string
	// Role is what the caller is.
	Role Role
}

// String returns "<org>/<id> (<role>)", for logs.
func (c Caller) String() string { return c.Org + "/" + c.ID + " (" + c.Role.String() + ")" }

// check reports what is wrong with a caller Options.Authenticate returned.
func (c Caller) check() error {
	if err := safename.Check(c.Org); err != nil {
		return fmt.Errorf("caller organisation %w", err)
	}
	if err := safename.Check(c.ID); err != nil {
		return fmt.Errorf("caller id %w", err)
	}
	if c.Role < RoleUser || c.Role > RoleNode {
		return fmt.Errorf("caller role %d is not a Role", int(c.Role))
	}
	return nil
}

// Credentials are what a request presents, read as anax's agbot reads them
// (open-horizon/anax agreementbot/secure_api.go, processExchangeCred and
// authenticateWithExchange): HTTP Basic with "<org>/<user>" and the
// password, as hzn sends it; or "Authorization: Bearer <token>" with the
// headers X-Organization and X-UserId. Printing Credentials (fmt, slog,
// encoding/json) never shows the password or token.
type Credentials struct {
	// Org and User are the organisation and the user (or node) id; either
	// may be empty when the request did not give it (a Basic user id
	// without "<org>/", a bearer token without the headers).
	Org, User string
	// Secret is the password or the bearer token.
	Secret edgesecrets.Sensitive
	// Bearer is true for a bearer token.
	Bearer bool
}

// Format implements fmt.Formatter: everything but the secret.
func (c Credentials) Format(f fmt.State, _ rune) {
	_, _ = fmt.Fprintf(f, "{Org:%q User:%q Secret:%s Bearer:%t}", c.Org, c.User, edgesecrets.Redacted, c.Bearer) // fmt.State buffers in memory; Format has no error to return
}

// LogValue implements slog.LogValuer: everything but the secret.
func (c Credentials) LogValue() slog.Value {
	return slog.GroupValue(slog.String("org", c.Org), slog.String("user", c.User), slog.Bool("bearer", c.Bearer))
}

// Headers anax's agbot reads with a bearer token.
const (
	headerOrganization = "X-Organization"
	headerUserID       = "X-UserId"
)

// ReadCredentials returns the request's credentials, read as the handler
// reads them, or false when it carries none (no Basic credentials, no
// bearer token): for an embedder's own routes beside the API, checked with
// the same Options.Authenticate.
func ReadCredentials(r *http.Request) (Credentials, bool) {
	if token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return Credentials{Org: r.Header.Get(headerOrganization), User: r.Header.Get(headerUserID), Secret: edgesecrets.Sensitive(token), Bearer: true}, token != ""
	}
	id, password, ok := r.BasicAuth()
	if !ok {
		return Credentials{}, false
	}
	org, user, found := strings.Cut(id, "/")
	if !found {
		org, user = "", id
	}
	return Credentials{Org: org, User: user, Secret: edgesecrets.Sensitive(password)}, true
}
