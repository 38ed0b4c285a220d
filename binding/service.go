package binding

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/edgesecrets/edgesecrets/agreement"
)

// Secret formats a service definition may ask for (agreement's).
const (
	// FormatJSON: the file holds the secret's key/value pairs as a JSON
	// object. The default when "format" is empty.
	FormatJSON = agreement.FormatJSON
	// FormatRaw: the secret has one key; the file holds its value's bytes.
	FormatRaw = agreement.FormatRaw
)

// ServiceSecret declares one secret of a service: an entry of the service
// definition's "secrets" object, keyed by the service secret name (which
// becomes the file name under /open-horizon-secrets).
//
//	"secrets": {"db_password": {"type": "basic-auth", "description": "...", "format": "json"}}
type ServiceSecret struct {
	// Type is a hint to the deployer ("basic-auth", "certificate"); not
	// interpreted.
	Type string `json:"type,omitempty"`
	// Description tells the deployer what the secret is for.
	Description string `json:"description,omitempty"`
	// Format is FormatJSON (default when empty) or FormatRaw.
	Format string `json:"format,omitempty"`
}

// Limits on decoded documents. Larger input is refused by the decoders.
const (
	// MaxServiceDefinitionSize bounds a service definition document; the
	// limit is generous because clusterDeployment may carry a whole
	// operator archive.
	MaxServiceDefinitionSize = 16 << 20
	// MaxDocumentSize bounds a pattern, deployment policy or hub URL document.
	MaxDocumentSize = 1 << 20
	// MaxSecretsPerService bounds a service definition's "secrets".
	MaxSecretsPerService = 256
	// MaxRequiredServices bounds a service definition's "requiredServices".
	MaxRequiredServices = 256
	// MaxContainers bounds the containers of a deployment.
	MaxContainers = 256
	// MaxSecretBindings bounds the "secretBinding" entries of a document.
	MaxSecretBindings = 1024
	// MaxBindingsPerEntry bounds the bindings of one secretBinding entry.
	MaxBindingsPerEntry = 256
	// MaxTopLevelServices bounds the services a pattern deploys.
	MaxTopLevelServices = 256
)

// ServiceDependency is an entry of a service definition's
// "requiredServices". Open Horizon writes the version constraint as
// "versionRange", older definitions as "version" (a bare version, meaning
// that version or newer).
type ServiceDependency struct {
	Org          string `json:"org"`
	URL          string `json:"url"`
	Arch         string `json:"arch,omitempty"`
	VersionRange string `json:"versionRange,omitempty"`
	Version      string `json:"version,omitempty"`
}

// rangeText returns the dependency's version constraint: VersionRange, else
// Version, else "" (any version).
func (d ServiceDependency) rangeText() string {
	if d.VersionRange != "" {
		return d.VersionRange
	}
	return d.Version
}

// DeploymentConfig is a service's device deployment: its containers, keyed
// by container name (the names serviceContainer refers to). Each container's
// own configuration is kept as raw JSON and not interpreted here.
type DeploymentConfig struct {
	Services map[string]json.RawMessage `json:"services"`
}

// ServiceDefinition is the part of an Open Horizon service definition that
// secret validation needs. Other fields are ignored on decode.
type ServiceDefinition struct {
	Org              string                   `json:"org"`
	URL              string                   `json:"url"`
	Version          string                   `json:"version"`
	Arch             string                   `json:"arch"`
	RequiredServices []ServiceDependency      `json:"requiredServices,omitempty"`
	Secrets          map[string]ServiceSecret `json:"secrets,omitempty"`
	// Deployment is the device deployment; nil when the service has none.
	// Decoding accepts the object form of hzn files and the
	// JSON-in-a-string form of the exchange ("" meaning none).
	Deployment *DeploymentConfig `json:"deployment,omitempty"`
	// ClusterDeployment is the edge-cluster deployment, kept opaque. Absent,
	// null, "" and {} mean none.
	ClusterDeployment json.RawMessage `json:"clusterDeployment,omitempty"`
}

// DeploymentKind says where a service can run.
type DeploymentKind int

// Deployment kinds.
const (
	// DeployNone: neither a device nor a cluster deployment.
	DeployNone DeploymentKind = iota
	// DeployDevice: device containers only.
	DeployDevice
	// DeployCluster: an edge-cluster deployment only.
	DeployCluster
	// DeployMixed: both.
	DeployMixed
)

// String returns "none", "device", "cluster" or "device+cluster".
func (k DeploymentKind) String() string {
	switch k {
	case DeployNone:
		return "none"
	case DeployDevice:
		return "device"
	case DeployCluster:
		return "cluster"
	case DeployMixed:
		return "device+cluster"
	}
	return fmt.Sprintf("DeploymentKind(%d)", int(k))
}

// DeploymentKind reports whether the service has a device deployment, a
// cluster deployment, both or neither.
func (d *ServiceDefinition) DeploymentKind() DeploymentKind {
	device := d.Deployment != nil && len(d.Deployment.Services) > 0
	cluster := !emptyJSON(d.ClusterDeployment)
	switch {
	case device && cluster:
		return DeployMixed
	case cluster:
		return DeployCluster
	case device:
		return DeployDevice
	}
	return DeployNone
}

// Containers returns the names of the device deployment's containers, sorted.
func (d *ServiceDefinition) Containers() []string {
	if d.Deployment == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(d.Deployment.Services))
}

// Ref returns the service's identity (without a container).
func (d *ServiceDefinition) Ref() ServiceRef {
	return ServiceRef{Org: d.Org, URL: d.URL, Arch: d.Arch, Version: d.Version}
}

// emptyJSON reports whether raw is absent, null, "" or {}.
func emptyJSON(raw json.RawMessage) bool {
	switch string(bytes.TrimSpace(raw)) {
	case "", "null", `""`, "{}":
		return true
	}
	return false
}

// UnmarshalJSON decodes a service definition, ignoring fields it does not
// use, and enforces the count limits.
func (d *ServiceDefinition) UnmarshalJSON(b []byte) error {
	const what = "service definition"
	type plain ServiceDefinition // without this method
	var in plain
	if err := unmarshal(b, what, &in); err != nil {
		return err
	}
	switch {
	case len(in.Secrets) > MaxSecretsPerService:
		return badInput(what, "more than %d secrets", MaxSecretsPerService)
	case len(in.RequiredServices) > MaxRequiredServices:
		return badInput(what, "more than %d requiredServices", MaxRequiredServices)
	}
	if in.Deployment != nil && in.Deployment.Services == nil {
		in.Deployment = nil // "" in the exchange form: no device deployment
	}
	if emptyJSON(in.ClusterDeployment) {
		in.ClusterDeployment = nil
	}
	*d = ServiceDefinition(in)
	return nil
}

// UnmarshalJSON reads a deployment given as an object, or as a string
// holding the object's JSON (exchange form; "" means none), and enforces
// MaxContainers.
func (c *DeploymentConfig) UnmarshalJSON(b []byte) error {
	const what = "deployment"
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := unmarshal(b, what, &s); err != nil {
			return err
		}
		b = bytes.TrimSpace([]byte(s))
	}
	if len(b) == 0 || string(b) == "null" {
		*c = DeploymentConfig{}
		return nil
	}
	type plain DeploymentConfig // without this method
	var in plain
	if err := unmarshal(b, what, &in); err != nil {
		return err
	}
	if len(in.Services) > MaxContainers {
		return badInput(what, "more than %d containers", MaxContainers)
	}
	*c = DeploymentConfig(in)
	return nil
}

// DecodeServiceDefinition reads one service definition of at most
// MaxServiceDefinitionSize bytes. Errors name what was wrong without quoting
// the input.
func DecodeServiceDefinition(r io.Reader) (*ServiceDefinition, error) {
	var d ServiceDefinition
	if err := decodeLimited(r, MaxServiceDefinitionSize, "service definition", &d); err != nil {
		return nil, err
	}
	return &d, nil
}
