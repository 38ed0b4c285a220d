package agentapi

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
)

// clusterSecretPrefix starts the name of the Kubernetes Secret that holds a
// cluster service's secrets, and is the value of its "name" label (anax
// kube_operator.HZN_SERVICE_SECRETS).
const clusterSecretPrefix = "hzn-service-secrets"

// maxClusterSecretSize is the most data Kubernetes accepts in one Secret,
// 1 MiB.
const maxClusterSecretSize = 1 << 20

// clusterSecretName returns the name of the Kubernetes Secret of an
// agreement's cluster service: "hzn-service-secrets-<agreement id>".
func clusterSecretName(agreementID string) string {
	return clusterSecretPrefix + "-" + agreementID
}

// ClusterSecretOptions say which Kubernetes Secret RenderClusterSecret
// writes.
type ClusterSecretOptions struct {
	// AgreementID names the Secret, "hzn-service-secrets-<AgreementID>".
	// Required.
	AgreementID string
	// Namespace is the operator's namespace; empty leaves it to the client
	// that creates the Secret.
	Namespace string
}

// clusterSecret is the Kubernetes v1 Secret object, as much of it as anax
// sets.
type clusterSecret struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   clusterSecretMeta `json:"metadata"`
	Type       string            `json:"type"`
	Data       map[string]string `json:"data"`
}

type clusterSecretMeta struct {
	Name      string            `json:"name"`
	Namespace string            `json:"namespace,omitempty"`
	Labels    map[string]string `json:"labels"`
}

var (
	// dnsSubdomain is a Kubernetes object name (RFC 1123 subdomain).
	dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	// dnsLabel is a Kubernetes namespace name (RFC 1123 label).
	dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	// secretKey is a key of a Secret's data.
	secretKey = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)
)

// RenderClusterSecret returns, as JSON, the Kubernetes Secret that Open
// Horizon's agent hands the operator of a cluster service (anax
// kube_operator CreateK8SSecrets): a v1 Secret of type Opaque named
// "hzn-service-secrets-<opts.AgreementID>", labelled name=hzn-service-secrets,
// with one data key per service secret holding what a device service's file
// would (see "File content"): {"key":…,"value":…} for an Open Horizon
// secret of the default format (anax also escapes '<', '>' and '&' in that
// JSON; the values are the same), the value alone for value_only. Apply it
// with any Kubernetes client; the operator mounts or reads it.
//
// ss is the cluster service's secrets from the agreement (a ServiceSecrets
// whose Container is empty). Errors match edgesecrets.ErrInvalid and name
// what is wrong (the agreement id or namespace that makes no Kubernetes
// name, a secret name that is no Secret key, a secret whose data does not
// fit its format, data over 1 MiB, the most a Kubernetes Secret takes); they
// never hold a value.
func RenderClusterSecret(opts ClusterSecretOptions, ss agreement.ServiceSecrets) ([]byte, error) {
	name := clusterSecretName(opts.AgreementID)
	switch {
	case opts.AgreementID == "":
		return nil, fmt.Errorf("agentapi: cluster secret: %w: no agreement id", edgesecrets.ErrInvalid)
	case len(name) > 253 || !dnsSubdomain.MatchString(name):
		return nil, fmt.Errorf("agentapi: cluster secret: %w: agreement id %s makes no Kubernetes object name (lower-case letters, digits, '-' and '.', at most 253 bytes in all)", edgesecrets.ErrInvalid, quoteName(opts.AgreementID))
	case opts.Namespace != "" && (len(opts.Namespace) > 63 || !dnsLabel.MatchString(opts.Namespace)):
		return nil, fmt.Errorf("agentapi: cluster secret: %w: namespace %s is not a Kubernetes namespace name", edgesecrets.ErrInvalid, quoteName(opts.Namespace))
	}
	if err := ss.Service.Validate(); err != nil {
		return nil, fmt.Errorf("agentapi: cluster secret: %w: %w", edgesecrets.ErrInvalid, err)
	}
	out := clusterSecret{
		APIVersion: "v1", Kind: "Secret", Type: "Opaque",
		Metadata: clusterSecretMeta{Name: name, Namespace: opts.Namespace, Labels: map[string]string{"name": clusterSecretPrefix}},
		Data:     make(map[string]string, len(ss.Secrets)),
	}
	size := 0
	for _, key := range slices.Sorted(maps.Keys(ss.Secrets)) {
		if len(key) > 253 || !secretKey.MatchString(key) {
			return nil, fmt.Errorf("agentapi: cluster secret: %w: secret name %s is not a Kubernetes Secret key (letters, digits, '-', '_' and '.')", edgesecrets.ErrInvalid, quoteName(key))
		}
		content, err := renderSecret(key, ss.Secrets[key])
		if err != nil {
			return nil, fmt.Errorf("agentapi: cluster secret: %w", err)
		}
		if size += len(key) + len(content); size > maxClusterSecretSize {
			return nil, fmt.Errorf("agentapi: cluster secret: %w: the secrets of %s hold more than %d bytes, the most a Kubernetes Secret takes", edgesecrets.ErrInvalid, ss.Service, maxClusterSecretSize)
		}
		out.Data[key] = base64.StdEncoding.EncodeToString(content)
	}
	return json.Marshal(out)
}
