package secretsapi

import "encoding/json"

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
