// Package agbotapi is the wire form of the agbot's secret-existence API
// that binding.Client calls and secretsapi's handler serves: its routes,
// the design route's error codes and the answer bodies other than
// binding.Health. Open Horizon's own agbot (anax) serves the Open Horizon
// routes under its secure API.
package agbotapi

// Routes of the API.
const (
	// SecretsPath prefixes the design's existence route,
	// GET /secrets/<vault-secret-name>: 200 {"exists":true}, 404
	// {"exists":false}; the agbot takes the organisation from the
	// caller's credentials.
	SecretsPath = "/secrets/"
	// OrgPath prefixes Open Horizon's secrets-manager routes; existence is
	// LIST /org/{org}/secrets/<vault-secret-name>, always 200
	// {"exists":true|false} (anax agreementbot/secure_api.go, listVaultSecret).
	OrgPath = "/org/"
	// HealthPath is GET /health, answered in anax's shape (binding.Health).
	HealthPath = "/health"
	// MethodList is the LIST method of Open Horizon's secrets-manager
	// routes: list a directory, or check a name's existence.
	MethodList = "LIST"
)

// Error codes in the design route's JSON error bodies {"error": "...",
// "code": "..."}. (Open Horizon's routes answer errors with a JSON string,
// as anax does.)
const (
	// ErrUnauthorized (401): the authentication hook refused the caller.
	ErrUnauthorized = "unauthorized"
	// ErrForbidden (403): the caller may not ask about this secret. The
	// answer is the same whether or not the secret exists.
	ErrForbidden = "forbidden"
	// ErrInvalidName (400): the vault secret name breaks the naming
	// rules, or the store does not accept it.
	ErrInvalidName = "invalid_name"
	// ErrNoStore (503): the hub has no secret store configured.
	ErrNoStore = "no_store"
	// ErrStoreUnavailable (503): the store did not answer; retry shortly.
	ErrStoreUnavailable = "store_unavailable"
	// ErrStoreForbidden (503): the store refused the agbot's
	// credentials; retrying does not help.
	ErrStoreForbidden = "store_forbidden"
	// ErrInternal (500): an unexpected store error.
	ErrInternal = "internal"
	// ErrNotFound (404): no such resource (not a secret's absence,
	// which is 404 {"exists":false}).
	ErrNotFound = "not_found"
	// ErrMethod (405): the method is not served on this path.
	ErrMethod = "method_not_allowed"
)

// Existence is the body of an existence answer.
type Existence struct {
	Exists bool `json:"exists"`
}

// Error is the body of the design route's error answers.
type Error struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}
