package binding

import (
	"encoding/json"
	"time"
)

// Routes of the agbot's secret APIs that Client calls. The agbot serves
// them with package secretsapi; Open Horizon's own agbot (anax) serves the
// Open Horizon routes under its secure API.
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
	// HealthPath is GET /health, answered in anax's shape (Health).
	HealthPath = "/health"
	// MethodList is the LIST method of Open Horizon's secrets-manager
	// routes: list a directory, or check a name's existence.
	MethodList = "LIST"
	// EnvAgbotURL names the environment variable from which hzn takes the
	// URL of the agbot's secure API (anax cli/cliutils/cliutils.go,
	// GetAgbotSecureAPIUrlBase), and the examples too.
	EnvAgbotURL = "HZN_AGBOT_URL"
)

// Error codes in the design route's JSON error bodies {"error": "...",
// "code": "..."}. (Open Horizon's routes answer errors with a JSON string,
// as anax does.)
const (
	// APIErrUnauthorized (401): the authentication hook refused the caller.
	APIErrUnauthorized = "unauthorized"
	// APIErrForbidden (403): the caller may not ask about this secret. The
	// answer is the same whether or not the secret exists.
	APIErrForbidden = "forbidden"
	// APIErrInvalidName (400): the vault secret name breaks the naming
	// rules, or the store does not accept it.
	APIErrInvalidName = "invalid_name"
	// APIErrNoStore (503): the hub has no secret store configured.
	APIErrNoStore = "no_store"
	// APIErrStoreUnavailable (503): the store did not answer; retry shortly.
	APIErrStoreUnavailable = "store_unavailable"
	// APIErrStoreForbidden (503): the store refused the agbot's
	// credentials; retrying does not help.
	APIErrStoreForbidden = "store_forbidden"
	// APIErrInternal (500): an unexpected store error.
	APIErrInternal = "internal"
	// APIErrNotFound (404): no such resource (not a secret's absence,
	// which is 404 {"exists":false}).
	APIErrNotFound = "not_found"
	// APIErrMethod (405): the method is not served on this path.
	APIErrMethod = "method_not_allowed"
)

// Existence is the body of an existence answer.
type Existence struct {
	Exists bool `json:"exists"`
}

// APIError is the body of the design route's error answers.
type APIError struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// Health is the body of GET /health, in the shape anax's agbot answers it
// (open-horizon/anax apicommon/status.go, Info; agreementbot/api.go,
// health):
//
//	{"configuration": {...}, "liveHealth": {"lastDBHeartbeat": 0, "lastVaultInteraction": 1700000000}}
type Health struct {
	Configuration *HealthConfiguration `json:"configuration"`
	LiveHealth    *LiveHealth          `json:"liveHealth"`
}

// HealthConfiguration is the "configuration" of a Health answer: what the
// agbot knows of its hub (anax apicommon/status.go, Configuration). Fields
// the agbot does not know are empty.
type HealthConfiguration struct {
	ExchangeAPI     string `json:"exchange_api"`
	ExchangeVersion string `json:"exchange_version,omitempty"`
	MinExchVersion  string `json:"required_minimum_exchange_version"`
	PrefExchVersion string `json:"preferred_exchange_version"`
	MMSAPI          string `json:"mms_api"`
	AgbotAPI        string `json:"agbot_api,omitempty"`
	Arch            string `json:"architecture"`
	HorizonVersion  string `json:"horizon_version"`
}

// LiveHealth is the "liveHealth" of a Health answer, in Unix seconds; 0
// means never (anax apicommon/status.go, HealthTimestamps).
type LiveHealth struct {
	// LastDBHeartbeat is the agbot's last database heartbeat.
	LastDBHeartbeat uint64 `json:"lastDBHeartbeat"`
	// LastVaultInteraction is the last time the agbot successfully talked
	// to the secret store (an answer, including "not found", counts).
	LastVaultInteraction uint64 `json:"lastVaultInteraction"`
}

// LastVaultInteractionTime returns liveHealth.lastVaultInteraction as a
// time, or the zero time when it is 0 or missing.
func (h Health) LastVaultInteractionTime() time.Time {
	if h.LiveHealth == nil || h.LiveHealth.LastVaultInteraction == 0 {
		return time.Time{}
	}
	return time.Unix(int64(h.LiveHealth.LastVaultInteraction), 0)
}

// UnmarshalJSON also reads the earlier edgesecrets form, with
// lastVaultInteraction at the top level, into LiveHealth.
func (h *Health) UnmarshalJSON(b []byte) error {
	type plain Health
	var v struct {
		plain
		LastVaultInteraction *uint64 `json:"lastVaultInteraction"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*h = Health(v.plain)
	if h.LiveHealth == nil && v.LastVaultInteraction != nil {
		h.LiveHealth = &LiveHealth{LastVaultInteraction: *v.LastVaultInteraction}
	}
	return nil
}
