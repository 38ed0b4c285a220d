package agbotsecrets_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/open-horizon/anax/abstractprotocol"
	"github.com/open-horizon/anax/agreementbot"
	"github.com/open-horizon/anax/agreementbot/secrets"
	"github.com/open-horizon/anax/basicprotocol"
	"github.com/open-horizon/anax/compcheck"
	"github.com/open-horizon/anax/config"
	"github.com/open-horizon/anax/exchange"
	"github.com/open-horizon/anax/exchangecommon"
	"github.com/open-horizon/anax/i18n"
	"github.com/open-horizon/anax/policy"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/anax/agbotsecrets"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

// The deployment the proposal tests propose: one service, org1's
// svc.example 1.0.0 on amd64, whose container declares the service secrets
// "db" and "api". One container: anax's compcheck counts only one
// container's secrets (ValidateSecretBindingForSingleService keeps the last
// result of a loop over the deployment's services map).
const (
	propOrg     = "org1"
	propNode    = "node1"
	propAgbotID = "org1/agbot1"
	propSvcURL  = "svc.example"
	propSvcVers = "1.0.0"
	propArch    = "amd64"
	propDeploy  = `{"services":{` +
		`"app":{"image":"example/app:1.0.0","secrets":{` +
		`"db":{"description":"database login"},"api":{"description":"API key"}}}}}`
)

// propAgbotToken is the agbot's exchange token in the proposal tests: what
// anax's agreement worker passes to GetSecretDetails as its own
// credentials.
const propAgbotToken = "agbot1-exchange-token"

// TestProposalNodeLevelSecretWins runs anax's own
// BaseAgreementWorker.ValidateAndExtractSecrets, the step of the agreement
// worker's initiation that fills a proposal's secrets, over the plugin, and
// checks which secret lands in the proposal: with enableNodeLevelSecrets the
// node's own secret when there is one, else the organisation's (anax asks
// again after a *secrets.NoSecretFound); without it, the organisation's.
// The filled policy then goes through anax's CreateProposal and the values
// are read back out of the proposal's terms and conditions.
//
// ValidateAndExtractSecrets is exported; anax calls it from
// BaseAgreementWorker.InitiateNewAgreement once it has the node, the
// service and its dependencies from the exchange, with those as arguments,
// which is what the test passes. The worker it runs on is built with anax's
// exported NewBasicAgreementWorker, with the agbot's exchange id and token
// in the config, as the agbot's protocol handler builds it.
func TestProposalNodeLevelSecretWins(t *testing.T) {
	store := memory.New()
	for name, d := range map[string]secrets.SecretDetails{
		// An org secret and the node's own for the same name.
		"org1/dbpass":                      {Key: "admin", Value: "org-wide db password"},
		"org1/node/node1/dbpass":           {Key: "admin", Value: "node1 db password"},
		"org1/node/node2/dbpass":           {Key: "admin", Value: "node2 db password"},
		"org1/apikey":                      {Key: "key", Value: "org-wide api key"},
		"org1/user/alice/token":            {Key: "alice", Value: "alice's token"},
		"org1/user/alice/node/node1/token": {Key: "alice", Value: "alice's token for node1"},
		// Only the org has this one: node-level lookups fall back to it.
		"org1/orgonly": {Key: "k", Value: "org-only value"},
	} {
		propPut(t, store, name, d)
	}
	plugin := propPlugin(t, store)
	w := propWorker(t, plugin)

	tests := []struct {
		name      string
		nodeLevel bool
		node      string
		db, api   string // the bound vault secret names
		wantDB    secrets.SecretDetails
		wantAPI   secrets.SecretDetails
	}{
		{
			name: "node-level: the node's own secret wins", nodeLevel: true, node: propNode,
			db: "dbpass", api: "orgonly",
			wantDB:  secrets.SecretDetails{Key: "admin", Value: "node1 db password"},
			wantAPI: secrets.SecretDetails{Key: "k", Value: "org-only value"},
		},
		{
			name: "node-level: another node gets its own", nodeLevel: true, node: "node2",
			db: "dbpass", api: "apikey",
			wantDB:  secrets.SecretDetails{Key: "admin", Value: "node2 db password"},
			wantAPI: secrets.SecretDetails{Key: "key", Value: "org-wide api key"},
		},
		{
			name: "node-level: a node without its own gets the org's", nodeLevel: true, node: "node3",
			db: "dbpass", api: "apikey",
			wantDB:  secrets.SecretDetails{Key: "admin", Value: "org-wide db password"},
			wantAPI: secrets.SecretDetails{Key: "key", Value: "org-wide api key"},
		},
		{
			name: "node-level: a user's secret for the node wins over the user's", nodeLevel: true, node: propNode,
			db: "user/alice/token", api: "apikey",
			wantDB:  secrets.SecretDetails{Key: "alice", Value: "alice's token for node1"},
			wantAPI: secrets.SecretDetails{Key: "key", Value: "org-wide api key"},
		},
		{
			name: "not node-level: the org's secret even when the node has one", nodeLevel: false, node: propNode,
			db: "dbpass", api: "user/alice/token",
			wantDB:  secrets.SecretDetails{Key: "admin", Value: "org-wide db password"},
			wantAPI: secrets.SecretDetails{Key: "alice", Value: "alice's token"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sb := exchangecommon.SecretBinding{
				ServiceOrgid:           propOrg,
				ServiceUrl:             propSvcURL,
				ServiceArch:            propArch,
				ServiceVersionRange:    "[1.0.0,INFINITY)",
				EnableNodeLevelSecrets: tc.nodeLevel,
				Secrets:                []exchangecommon.BoundSecret{{"db": tc.db}, {"api": tc.api}},
			}
			consumer := propConsumerPolicy(t, sb)
			deviceID := propOrg + "/" + tc.node

			err := w.ValidateAndExtractSecrets(consumer, deviceID, propService(), nil, "worker-test", i18n.GetMessagePrinter())
			require.NoError(t, err)

			got := propDetails(t, consumer.SecretDetails)
			require.Equal(t, map[string]secrets.SecretDetails{"db": tc.wantDB, "api": tc.wantAPI}, got,
				"the secret details ValidateAndExtractSecrets put in the policy")

			// The filled policy is what anax merges into the proposal.
			proposal := propProposal(t, consumer)
			var tsandcs policy.Policy
			require.NoError(t, json.Unmarshal([]byte(proposal.TsAndCs()), &tsandcs))
			require.Equal(t, got, propDetails(t, tsandcs.SecretDetails), "the secret details in the proposal's terms and conditions")
		})
	}
}

// TestProposalMissingSecretFails: a bound secret that exists at no level
// ends the agreement attempt with anax's *secrets.NoSecretFound, the type
// anax's worker switches on.
func TestProposalMissingSecretFails(t *testing.T) {
	store := memory.New()
	propPut(t, store, "org1/apikey", secrets.SecretDetails{Key: "key", Value: "org-wide api key"})
	w := propWorker(t, propPlugin(t, store))

	for _, nodeLevel := range []bool{true, false} {
		sb := exchangecommon.SecretBinding{
			ServiceOrgid: propOrg, ServiceUrl: propSvcURL, EnableNodeLevelSecrets: nodeLevel,
			Secrets: []exchangecommon.BoundSecret{{"db": "nosuchsecret"}, {"api": "apikey"}},
		}
		consumer := propConsumerPolicy(t, sb)
		err := w.ValidateAndExtractSecrets(consumer, propOrg+"/"+propNode, propService(), nil, "worker-test", i18n.GetMessagePrinter())
		var nf *secrets.NoSecretFound
		require.ErrorAs(t, err, &nf, "nodeLevel=%v", nodeLevel)
		require.Empty(t, consumer.SecretDetails, "nodeLevel=%v: nothing is proposed", nodeLevel)
	}
}

// propPut writes an Open Horizon secret as anax's agbot lays it out: data
// {"key","value"} at "<org>/[user/<u>/][node/<n>/]<name>".
func propPut(t testing.TB, store *secretstore.Store, name string, d secrets.SecretDetails) {
	t.Helper()
	_, err := store.Put(context.Background(), &secretstore.Secret{
		Name: name,
		Data: edgesecrets.Data{"key": []byte(d.Key), "value": []byte(d.Value)},
	}, secretstore.PutOptions{})
	require.NoError(t, err, "writing %s", name)
}

// propPlugin returns the plugin over store with the agbot's credentials,
// logged in.
func propPlugin(t testing.TB, store *secretstore.Store) *agbotsecrets.Plugin {
	t.Helper()
	p, err := agbotsecrets.New(agbotsecrets.Options{
		Store:      store,
		AgbotID:    propAgbotID,
		AgbotToken: edgesecrets.Sensitive(propAgbotToken),
		// GetSecretDetails with the agbot's own credentials never asks the
		// exchange: an address nothing listens on proves it.
		ExchangeURL: "http://127.0.0.1:1/v1",
		ChangeFile:  t.TempDir() + "/changes.json",
	})
	require.NoError(t, err)
	require.NoError(t, p.Login())
	t.Cleanup(p.Close)
	require.True(t, p.IsReady())
	return p
}

// propWorker builds anax's agreement worker the way its protocol handler
// does, with the agbot's exchange id and token in the config and the
// plugin as its secrets manager.
func propWorker(t testing.TB, plugin secrets.AgbotSecrets) *agreementbot.BasicAgreementWorker {
	t.Helper()
	cfg := &config.HorizonConfig{}
	cfg.AgreementBot.ExchangeId = propAgbotID
	cfg.AgreementBot.ExchangeToken = propAgbotToken
	cfg.AgreementBot.ExchangeURL = "http://127.0.0.1:1/v1"
	collab, err := config.NewCollaborators(*cfg)
	require.NoError(t, err)
	cfg.Collaborators = *collab
	w := agreementbot.NewBasicAgreementWorker(nil, cfg, nil, nil, nil, nil, plugin, nil)
	require.Equal(t, propAgbotID, w.GetExchangeId(), "the worker acts as the agbot")
	return w
}

// propService is the top-level service definition as anax's worker has it
// from the exchange.
func propService() *compcheck.ServiceDefinition {
	return &compcheck.ServiceDefinition{Org: propOrg, ServiceDefinition: exchange.ServiceDefinition{
		URL: propSvcURL, Version: propSvcVers, Arch: propArch, Deployment: propDeploy,
	}}
}

// propConsumerPolicy is a deployment policy's consumer policy with one
// workload (the service) and the binding.
func propConsumerPolicy(t testing.TB, sb exchangecommon.SecretBinding) *policy.Policy {
	t.Helper()
	p := policy.Policy_Factory("org1/deploy-svc")
	require.NoError(t, p.Add_Agreement_Protocol(policy.AgreementProtocol_Factory(policy.BasicProtocol)))
	p.Workloads = []policy.Workload{{WorkloadURL: propSvcURL, Org: propOrg, Version: propSvcVers, Arch: propArch, Deployment: propDeploy}}
	p.SecretBinding = []exchangecommon.SecretBinding{sb}
	return p
}

// propProposal merges consumer with a node's producer policy into a
// proposal through anax's basic protocol, as the agbot sends it.
func propProposal(t testing.TB, consumer *policy.Policy) abstractprotocol.Proposal {
	t.Helper()
	producer := policy.Policy_Factory("node policy")
	require.NoError(t, producer.Add_Agreement_Protocol(policy.AgreementProtocol_Factory(policy.BasicProtocol)))
	ph := basicprotocol.NewProtocolHandler(http.DefaultClient, nil)
	p, err := abstractprotocol.CreateProposal(ph, "agreement-1", producer, consumer, basicprotocol.PROTOCOL_CURRENT_VERSION,
		propAgbotID, &consumer.Workloads[0], "", 0)
	require.NoError(t, err)
	return p
}

// propDetails decodes the details anax put in a policy's secretDetails:
// per service secret, base64 of SecretDetails' JSON.
func propDetails(t testing.TB, bindings []exchangecommon.SecretBinding) map[string]secrets.SecretDetails {
	t.Helper()
	out := map[string]secrets.SecretDetails{}
	for _, sb := range bindings {
		for _, bs := range sb.Secrets {
			for svcSecret, enc := range bs {
				raw, err := base64.StdEncoding.DecodeString(enc)
				require.NoError(t, err, "secret details of %s are not base64", svcSecret)
				var d secrets.SecretDetails
				require.NoError(t, json.Unmarshal(raw, &d), "secret details of %s", svcSecret)
				_, dup := out[svcSecret]
				require.False(t, dup, "service secret %s proposed twice", svcSecret)
				out[svcSecret] = d
			}
		}
	}
	return out
}
