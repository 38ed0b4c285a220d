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

// ServiceSecret declares one secret of a service, keyed by the service
// secret name (which becomes the file name under /open-horizon-secrets):
//
//	"secrets": {"db_password": {"type": "basic-auth", "description": "...", "format": "value_only"}}
//
// Open Horizon declares secrets per container and for the cluster
// deployment (Workload.Secrets, Workload.Secrets);
// the design form declares them at the top of the definition
// (ServiceDefinition.Secrets). Open Horizon's internal members (svcOrg,
// svcUrl, svcVersionRange) are ignored.
type ServiceSecret struct {
	// Type is a hint to the deployer ("basic-auth", "certificate"); not
	// interpreted.
	Type string `json:"type,omitempty"`
	// Description tells the deployer what the secret is for.
	Description string `json:"description,omitempty"`
	// Format is agreement.FormatJSON (the default when empty), agreement.FormatValueOnly or
	// agreement.FormatRaw.
	Format string `json:"format,omitempty"`
}

// format returns the declared format, agreement.FormatJSON when empty.
func (s ServiceSecret) format() string {
	if s.Format == "" {
		return agreement.FormatJSON
	}
	return s.Format
}

// Limits on decoded documents, written in the doc comments of the decoders
// that apply them. Larger input is refused.
const (
	// maxServiceDefinitionSize bounds a service definition document; the
	// limit is generous because clusterDeployment may carry a whole
	// operator archive.
	maxServiceDefinitionSize = 16 << 20
	// maxDocumentSize bounds a pattern, deployment policy or hub URL document.
	maxDocumentSize = 1 << 20
	// maxSecretsPerService bounds the secrets of each place a service
	// declares them (the top level, each container, the cluster deployment).
	maxSecretsPerService = 256
	// maxRequiredServices bounds a service definition's "requiredServices".
	maxRequiredServices = 256
	// maxContainers bounds the containers of a deployment.
	maxContainers = 256
	// maxSecretBindings bounds the "secretBinding" entries of a document.
	maxSecretBindings = 1024
	// maxBindingsPerEntry bounds the bindings of one secretBinding entry.
	maxBindingsPerEntry = 256
	// maxTopLevelServices bounds the services a pattern deploys.
	maxTopLevelServices = 256
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
// by container name (the names serviceContainer refers to).
type DeploymentConfig struct {
	Services map[string]Workload `json:"services"`
}

// Workload is one container of a device deployment
// (deployment.services.<container>) or a service's edge-cluster deployment
// (clusterDeployment): the secrets it declares and the rest of its
// configuration, kept as it is and not interpreted here. A container's
// secrets are mounted into it; the cluster deployment's are handed to the
// operator as one Kubernetes Secret.
type Workload struct {
	// Secrets are the secrets the workload declares ("secrets").
	Secrets map[string]ServiceSecret
	// Config holds the other members ("image", "binds", ... of a
	// container; "operatorYamlArchive", ... of a cluster deployment), each
	// as JSON.
	Config map[string]json.RawMessage
}

// ServiceDefinition is the part of an Open Horizon service definition that
// secret validation needs. Other fields are ignored on decode.
//
// Secrets are read from every place they are declared: each container of
// the device deployment and the cluster deployment (as Open Horizon ships
// them), and the top-level "secrets" of the design form. A service runs on
// devices when Deployment has containers, on edge clusters when
// ClusterDeployment is set, and may do both.
type ServiceDefinition struct {
	Org              string              `json:"org"`
	URL              string              `json:"url"`
	Version          string              `json:"version"`
	Arch             string              `json:"arch"`
	RequiredServices []ServiceDependency `json:"requiredServices,omitempty"`
	// Secrets are the design form's service-level secrets: a binding
	// delivers each to the container its serviceContainer names, or to the
	// only container.
	Secrets map[string]ServiceSecret `json:"secrets,omitempty"`
	// Deployment is the device deployment; nil when the service has none.
	// Decoding accepts the object form of hzn files and the
	// JSON-in-a-string form of the exchange ("" meaning none).
	Deployment *DeploymentConfig `json:"deployment,omitempty"`
	// ClusterDeployment is the edge-cluster deployment; nil when the
	// service has none. Both forms are accepted as for Deployment; absent,
	// null, "" and {} mean none.
	ClusterDeployment *Workload `json:"clusterDeployment,omitempty"`
}

// deploymentKind says where a service can run.
type deploymentKind int

// Deployment kinds.
const (
	deployNone    deploymentKind = iota // neither a device nor a cluster deployment
	deployDevice                        // device containers only
	deployCluster                       // an edge-cluster deployment only
	deployMixed                         // both
)

// kind reports whether the service has a device deployment, a cluster
// deployment, both or neither.
func (d *ServiceDefinition) kind() deploymentKind {
	device := d.Deployment != nil && len(d.Deployment.Services) > 0
	cluster := d.ClusterDeployment != nil
	switch {
	case device && cluster:
		return deployMixed
	case cluster:
		return deployCluster
	case device:
		return deployDevice
	}
	return deployNone
}

// containers returns the names of the device deployment's containers, sorted.
func (d *ServiceDefinition) containers() []string {
	if d.Deployment == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(d.Deployment.Services))
}

// ref returns the service's identity (without a container).
func (d *ServiceDefinition) ref() agreement.ServiceRef {
	return agreement.ServiceRef{Org: d.Org, URL: d.URL, Arch: d.Arch, Version: d.Version}
}

// Where a service secret is declared.
const (
	declService   = iota // the design form's top-level "secrets"
	declContainer        // deployment.services.<container>.secrets
	declCluster          // clusterDeployment.secrets
)

// declaration is one declared secret: where, and how its file looks.
type declaration struct {
	place     int
	container string // declContainer only
	name      string
	secret    ServiceSecret
}

// declarations lists every declared secret: service-level ones first, then
// each container's (containers sorted), then the cluster deployment's, each
// group sorted by name.
func (d *ServiceDefinition) declarations() []declaration {
	var out []declaration
	add := func(place int, container string, secrets map[string]ServiceSecret) {
		for _, name := range slices.Sorted(maps.Keys(secrets)) {
			out = append(out, declaration{place: place, container: container, name: name, secret: secrets[name]})
		}
	}
	add(declService, "", d.Secrets)
	for _, c := range d.containers() {
		add(declContainer, c, d.Deployment.Services[c].Secrets)
	}
	if d.ClusterDeployment != nil {
		add(declCluster, "", d.ClusterDeployment.Secrets)
	}
	return out
}

// UnmarshalJSON decodes a service definition, ignoring fields it does not
// use. It refuses more than 256 requiredServices, and more than 256 secrets
// in any one place they are declared (the top level, a container, the
// cluster deployment) or more than 256 containers.
func (d *ServiceDefinition) UnmarshalJSON(b []byte) error {
	const what = "service definition"
	type plain ServiceDefinition // without this method
	var in plain
	if err := unmarshal(b, what, &in); err != nil {
		return err
	}
	switch {
	case len(in.Secrets) > maxSecretsPerService:
		return badInput(what, "more than %d secrets", maxSecretsPerService)
	case len(in.RequiredServices) > maxRequiredServices:
		return badInput(what, "more than %d requiredServices", maxRequiredServices)
	}
	if len(in.RequiredServices) == 0 {
		in.RequiredServices = nil // [] and absent are the same
	}
	if len(in.Secrets) == 0 {
		in.Secrets = nil // {} and absent are the same
	}
	if in.Deployment != nil && in.Deployment.Services == nil {
		in.Deployment = nil // "" in the exchange form: no device deployment
	}
	if c := in.ClusterDeployment; c != nil && len(c.Secrets) == 0 && len(c.Config) == 0 {
		in.ClusterDeployment = nil // "" or {}: no cluster deployment
	}
	*d = ServiceDefinition(in)
	return nil
}

// unquoteDeployment returns the JSON of a deployment given as an object or
// as a string holding one (the exchange form); nil for "", null or absent.
func unquoteDeployment(b []byte, what string) ([]byte, error) {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := unmarshal(b, what, &s); err != nil {
			return nil, err
		}
		b = bytes.TrimSpace([]byte(s))
	}
	if len(b) == 0 || string(b) == "null" {
		return nil, nil
	}
	return b, nil
}

// UnmarshalJSON reads a deployment given as an object, or as a string
// holding the object's JSON (exchange form; "" means none), of at most 256
// containers with at most 256 secrets each.
func (c *DeploymentConfig) UnmarshalJSON(b []byte) error {
	const what = "deployment"
	b, err := unquoteDeployment(b, what)
	if err != nil || b == nil {
		*c = DeploymentConfig{}
		return err
	}
	var in struct {
		Services map[string]json.RawMessage `json:"services"`
	}
	if err := unmarshal(b, what, &in); err != nil {
		return err
	}
	if len(in.Services) > maxContainers {
		return badInput(what, "more than %d containers", maxContainers)
	}
	out := DeploymentConfig{}
	if in.Services != nil {
		out.Services = make(map[string]Workload, len(in.Services))
	}
	for name, raw := range in.Services {
		if name == "" {
			return badInput(what, "a container has an empty name")
		}
		var cc Workload
		if err := decodeSecretsHolder(raw, fmt.Sprintf("container %q", name), &cc.Secrets, &cc.Config); err != nil {
			return err
		}
		out.Services[name] = cc
	}
	*c = out
	return nil
}

// UnmarshalJSON reads a workload given as an object, or as a string
// holding the object's JSON (the exchange form of a cluster deployment; ""
// means none), of at most 256 secrets. (A deployment's containers are read
// as objects only.)
func (c *Workload) UnmarshalJSON(b []byte) error {
	const what = "clusterDeployment"
	b, err := unquoteDeployment(b, what)
	if err != nil || b == nil {
		*c = Workload{}
		return err
	}
	var out Workload
	if err := decodeSecretsHolder(b, what, &out.Secrets, &out.Config); err != nil {
		return err
	}
	*c = out
	return nil
}

// MarshalJSON writes the workload's configuration with its "secrets".
func (c Workload) MarshalJSON() ([]byte, error) {
	return encodeSecretsHolder(c.Secrets, c.Config)
}

// decodeSecretsHolder splits the JSON object raw (a container or a cluster
// deployment) into its "secrets" and its other members, in the form
// encoding writes them so that a decoded value encodes and decodes to
// itself. A null raw is empty.
func decodeSecretsHolder(raw []byte, what string, secrets *map[string]ServiceSecret, config *map[string]json.RawMessage) error {
	var members map[string]json.RawMessage
	if err := unmarshal(raw, what, &members); err != nil {
		return err
	}
	if s, ok := members["secrets"]; ok {
		delete(members, "secrets")
		if err := unmarshal(s, what+" secrets", secrets); err != nil {
			return err
		}
		if len(*secrets) > maxSecretsPerService {
			return badInput(what, "more than %d secrets", maxSecretsPerService)
		}
	}
	for k, v := range members {
		// Marshal's form (compact, HTML-escaped), which encoding writes.
		canonical, err := json.Marshal(v)
		if err != nil { // cannot happen: v came from the decoder
			return badInput(what, "member %q is not valid JSON", k)
		}
		members[k] = canonical
	}
	if len(members) > 0 {
		*config = members
	}
	return nil
}

// encodeSecretsHolder writes config's members and, when not nil, secrets
// as one JSON object.
func encodeSecretsHolder(secrets map[string]ServiceSecret, config map[string]json.RawMessage) ([]byte, error) {
	members := make(map[string]any, len(config)+1)
	for k, v := range config {
		if k != "secrets" {
			members[k] = v
		}
	}
	if secrets != nil {
		members["secrets"] = secrets
	}
	return json.Marshal(members)
}

// DecodeServiceDefinition reads one service definition of at most 16 MiB
// (clusterDeployment may carry a whole operator archive). Errors name what
// was wrong without quoting the input.
func DecodeServiceDefinition(r io.Reader) (*ServiceDefinition, error) {
	var d ServiceDefinition
	if err := decodeLimited(r, maxServiceDefinitionSize, "service definition", &d); err != nil {
		return nil, err
	}
	return &d, nil
}
