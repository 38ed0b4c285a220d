package agentapi_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
)

// k8sHelloSecret is anax's end-to-end cluster service k8s-hello-secret
// (test/gov/service_apireg.sh: clusterDeployment.secrets secret1, and
// secret2 with format value_only) with the secrets setup_secrets.sh binds
// to it: k8s-hello-secret1 {"key":"test","value":"k8s-password1"} and
// k8s-hello-secret2 {"key":"test","value":"k8s-password2"}.
func k8sHelloSecret() agreement.ServiceSecrets {
	return agreement.ServiceSecrets{
		Service: agreement.ServiceRef{Org: "e2edev@somecomp.com", URL: "k8s-hello-secret", Arch: "amd64", Version: "1.0.0"},
		Secrets: map[string]agreement.SecretDetails{
			"secret1": {Data: edgesecrets.Data{"key": []byte("test"), "value": []byte("k8s-password1")}},
			"secret2": {Format: agreement.FormatValueOnly, Data: edgesecrets.Data{"key": []byte("test"), "value": []byte("k8s-password2")}},
		},
	}
}

// TestRenderClusterSecret checks the Secret against what anax creates
// (kube_operator CreateK8SSecrets and resource/secrets_manager.go
// ProcessServiceSecretsWithInstanceIdForCluster): named
// hzn-service-secrets-<agreement id>, labelled name=hzn-service-secrets,
// secret1 holding json.Marshal of {"key","value"}, secret2 the value only.
func TestRenderClusterSecret(t *testing.T) {
	const agreementID = "6c3b4a8a0e1f9d2c7b5e4f3a2d1c0b9a8f7e6d5c4b3a29180706050403020100"
	out, err := agentapi.RenderClusterSecret(agentapi.ClusterSecretOptions{AgreementID: agreementID, Namespace: "openhorizon-agent"}, k8sHelloSecret())
	require.NoError(t, err)
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	assert.JSONEq(t, `{
		"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
		"metadata": {"name": "hzn-service-secrets-`+agreementID+`", "namespace": "openhorizon-agent", "labels": {"name": "hzn-service-secrets"}},
		"data": {"secret1": "`+b64(`{"key":"test","value":"k8s-password1"}`)+`", "secret2": "`+b64("k8s-password2")+`"}}`, string(out))
	assert.NotContains(t, string(out), "k8s-password", "values are base64 in data, as Kubernetes keeps them")

	out, err = agentapi.RenderClusterSecret(agentapi.ClusterSecretOptions{AgreementID: "a1"}, agreement.ServiceSecrets{Service: k8sHelloSecret().Service})
	require.NoError(t, err)
	var s map[string]any
	require.NoError(t, json.Unmarshal(out, &s))
	assert.NotContains(t, s["metadata"], "namespace", "left to the client")
	assert.Equal(t, map[string]any{}, s["data"])
}

func TestRenderClusterSecretErrors(t *testing.T) {
	ok := k8sHelloSecret()
	with := func(change func(*agreement.ServiceSecrets)) agreement.ServiceSecrets {
		ss := k8sHelloSecret()
		change(&ss)
		return ss
	}
	cases := []struct {
		name    string
		opts    agentapi.ClusterSecretOptions
		ss      agreement.ServiceSecrets
		wantErr string
	}{
		{"no agreement id", agentapi.ClusterSecretOptions{}, ok, "no agreement id"},
		{"agreement id in upper case", agentapi.ClusterSecretOptions{AgreementID: "ABC"}, ok, `agreement id "ABC" makes no Kubernetes object name`},
		{"agreement id too long", agentapi.ClusterSecretOptions{AgreementID: strings.Repeat("a", 240)}, ok, "at most 253 bytes"},
		{"namespace not a label", agentapi.ClusterSecretOptions{AgreementID: "a1", Namespace: "my.ns"}, ok, `namespace "my.ns"`},
		{"service without org", agentapi.ClusterSecretOptions{AgreementID: "a1"}, with(func(ss *agreement.ServiceSecrets) { ss.Service.Org = "" }), "org and url are required"},
		{"secret name no Secret key", agentapi.ClusterSecretOptions{AgreementID: "a1"}, with(func(ss *agreement.ServiceSecrets) {
			ss.Secrets["db password"] = ss.Secrets["secret1"]
		}), `secret name "db password" is not a Kubernetes Secret key`},
		{"value_only without a value", agentapi.ClusterSecretOptions{AgreementID: "a1"}, with(func(ss *agreement.ServiceSecrets) {
			ss.Secrets["secret2"] = agreement.SecretDetails{Format: agreement.FormatValueOnly, Data: edgesecrets.Data{"password": []byte("s3cr3t-pw")}}
		}), `format "value_only" needs a "value" key`},
		{"over the Kubernetes limit", agentapi.ClusterSecretOptions{AgreementID: "a1"}, with(func(ss *agreement.ServiceSecrets) {
			ss.Secrets["big"] = agreement.SecretDetails{Format: agreement.FormatRaw, Data: edgesecrets.Data{"v": make([]byte, 1<<20)}}
		}), "more than 1048576 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := agentapi.RenderClusterSecret(c.opts, c.ss)
			require.ErrorIs(t, err, edgesecrets.ErrInvalid)
			assert.ErrorContains(t, err, c.wantErr)
			assert.Nil(t, out)
			for _, v := range []string{"k8s-password", "s3cr3t-pw"} {
				assert.NotContains(t, err.Error(), v)
			}
		})
	}
}

// An agent on an edge cluster writes the cluster service's secrets as the
// Kubernetes Secret its operator expects, and applies it with its client.
func ExampleRenderClusterSecret() {
	ss := agreement.ServiceSecrets{
		Service: agreement.ServiceRef{Org: "myorg", URL: "k8s-hello-secret", Arch: "amd64", Version: "1.0.0"},
		Secrets: map[string]agreement.SecretDetails{
			"token": {Format: agreement.FormatValueOnly, Data: edgesecrets.Data{"key": []byte("api"), "value": []byte("s3cr3t")}},
		},
	}
	manifest, err := agentapi.RenderClusterSecret(agentapi.ClusterSecretOptions{AgreementID: "a1b2c3", Namespace: "openhorizon-agent"}, ss)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(manifest))
	// Output:
	// {"apiVersion":"v1","kind":"Secret","metadata":{"name":"hzn-service-secrets-a1b2c3","namespace":"openhorizon-agent","labels":{"name":"hzn-service-secrets"}},"type":"Opaque","data":{"token":"czNjcjN0"}}
}
