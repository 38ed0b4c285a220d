package secretsapi

// Routes the handler serves (see the package documentation for each
// route's methods and answers). An embedder mounting the handler, or
// calling it without Client, uses these.
const (
	// OrgPath prefixes Open Horizon's secrets-manager routes,
	// /org/{org}/secrets/... and /org/{org}/allsecrets; existence is LIST
	// /org/{org}/secrets/<vault-secret-name>, always 200
	// {"exists":true|false} (anax agreementbot/secure_api.go,
	// listVaultSecret).
	OrgPath = "/org/"
	// SecretsPath prefixes the design's existence route,
	// GET /secrets/<vault-secret-name>: 200 {"exists":true}, 404
	// {"exists":false}; the agbot takes the organisation from the
	// caller's credentials.
	SecretsPath = "/secrets/"
	// HealthPath is GET /health, answered with a Health body, without
	// credentials.
	HealthPath = "/health"
	// DeployCheckPath is GET /deploycheck/secretbindingcompatible, the
	// compatibility check of a pattern's or policy's secret bindings.
	DeployCheckPath = "/deploycheck/secretbindingcompatible"
	// MethodList is the LIST method of Open Horizon's secrets-manager
	// routes: list a directory, or check a name's existence.
	MethodList = "LIST"
)

// Codes of the design route's error bodies (ErrorBody.Code). Open
// Horizon's routes answer errors with a JSON string, as anax does.
const (
	// CodeUnauthorized (401): the authentication hook refused the caller.
	CodeUnauthorized = "unauthorized"
	// CodeForbidden (403): the caller may not ask about this secret. The
	// answer is the same whether or not the secret exists.
	CodeForbidden = "forbidden"
	// CodeInvalidName (400): the vault secret name breaks the naming
	// rules, or the store does not accept it.
	CodeInvalidName = "invalid_name"
	// CodeNoStore (503): the hub has no secret store configured.
	CodeNoStore = "no_store"
	// CodeStoreUnavailable (503): the store did not answer; retry shortly.
	CodeStoreUnavailable = "store_unavailable"
	// CodeStoreForbidden (503): the store refused the agbot's
	// credentials; retrying does not help.
	CodeStoreForbidden = "store_forbidden"
	// CodeInternal (500): an unexpected store error.
	CodeInternal = "internal"
	// CodeNotFound (404): no such resource (not a secret's absence,
	// which is 404 {"exists":false}).
	CodeNotFound = "not_found"
	// CodeMethod (405): the method is not served on this path.
	CodeMethod = "method_not_allowed"
)

// Existence is the body of an existence answer, on the design route and
// on Open Horizon's LIST of a name.
type Existence struct {
	Exists bool `json:"exists"`
}

// ErrorBody is the body of the design route's error answers.
type ErrorBody struct {
	// Error says what went wrong, for a person.
	Error string `json:"error"`
	// Code is one of the Code constants, for a program.
	Code string `json:"code"`
}
