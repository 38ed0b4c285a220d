package binding

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/internal/jsonproblem"
)

// refString writes a service the Open Horizon way, "org/url_version_arch",
// followed by " container <name>" when a container is set.
func refString(s agreement.ServiceRef) string {
	out := s.Org + "/" + s.URL + "_" + s.Version + "_" + s.Arch
	if s.Container != "" {
		out += " container " + s.Container
	}
	return out
}

// Binding binds one service secret to a vault secret.
type Binding struct {
	// ServiceSecret is the name the service declares (its file name).
	ServiceSecret string
	// VaultSecret is the vault secret name (see ParseVaultSecretName).
	VaultSecret string
}

// SecretBinding is one entry of a pattern's or deployment policy's
// "secretBinding": it selects services and binds their secrets. Open
// Horizon ships it as
//
//	{"serviceOrgid": "myorg", "serviceUrl": "com.example.db", "serviceArch": "amd64",
//	 "serviceVersionRange": "[1.0.0,2.0.0)", "enableNodeLevelSecrets": true,
//	 "secrets": [{"db_password": "user/alice/db"}]}
//
// and the design text as
//
//	{"serviceOrgid": "myorg", "serviceUrl": "com.example.db", "serviceArch": "amd64",
//	 "serviceVersionRange": "[1.0.0,2.0.0)", "serviceContainer": "db",
//	 "bindings": {"db_password": {"vaultSecret": "user/alice/db"}}}
//
// Decoding accepts both forms, also side by side in one entry, and every
// member of each "secrets" item (anax reads one member per item, chosen
// at random by Go's map order); it ignores unknown fields as Open Horizon
// does. Bindings keep the document's order, and a service secret bound
// twice is kept twice so that Validate can report it; an entry holds at
// most 256 bindings. Encoding writes the form the entry was decoded from
// (DesignForm): an entry that used "bindings" alone is written in the
// design form, any other in Open Horizon's form, one binding per item.
type SecretBinding struct {
	// ServiceOrgid and ServiceURL select the service; both are required.
	ServiceOrgid string
	ServiceURL   string
	// ServiceArch selects the architecture; "" or "*" selects any.
	ServiceArch string
	// ServiceVersionRange selects versions: an Open Horizon range such as
	// "[1.0.0,2.0.0)", "(1.0,INFINITY)" or a bare version meaning that
	// version or newer. "" selects any, as in Open Horizon.
	ServiceVersionRange string
	// ServiceContainer (design form only; Open Horizon has no such field)
	// narrows the bindings to one container of the service. Without it,
	// each secret goes to every container that declares it.
	ServiceContainer string
	// EnableNodeLevelSecrets makes each binding resolve, per node, to the
	// node-level secret when it exists and to the organisation- or
	// user-level one otherwise (see Report.Bindings).
	EnableNodeLevelSecrets bool
	// Bindings are the secret associations, in document order.
	Bindings []Binding
	// DesignForm makes MarshalJSON write the design text's form,
	//	"bindings": {"<service secret>": {"vaultSecret": "<vault secret>"}}
	// instead of the form Open Horizon ships and anax writes,
	//	"secrets": [{"<service secret>": "<vault secret>"}, ...]
	// Decoding sets it when the entry used "bindings" alone.
	DesignForm bool
}

type secretBindingJSON struct {
	ServiceOrgid           string          `json:"serviceOrgid"`
	ServiceURL             string          `json:"serviceUrl"`
	ServiceArch            string          `json:"serviceArch"`
	ServiceVersionRange    string          `json:"serviceVersionRange"`
	EnableNodeLevelSecrets *bool           `json:"enableNodeLevelSecrets,omitempty"`
	ServiceContainer       string          `json:"serviceContainer,omitempty"`
	Bindings               json.RawMessage `json:"bindings,omitempty"`
	Secrets                json.RawMessage `json:"secrets,omitempty"`
}

type vaultSecretJSON struct {
	VaultSecret *string `json:"vaultSecret"`
}

const secretBindingWhat = "secretBinding entry"

// UnmarshalJSON decodes the design form and Open Horizon's form.
func (b *SecretBinding) UnmarshalJSON(data []byte) error {
	var in secretBindingJSON
	if err := unmarshal(data, secretBindingWhat, &in); err != nil {
		return err
	}
	out := SecretBinding{
		ServiceOrgid: in.ServiceOrgid, ServiceURL: in.ServiceURL, ServiceArch: in.ServiceArch,
		ServiceVersionRange: in.ServiceVersionRange, ServiceContainer: in.ServiceContainer,
		EnableNodeLevelSecrets: in.EnableNodeLevelSecrets != nil && *in.EnableNodeLevelSecrets,
	}
	if !isNull(in.Bindings) && isNull(in.Secrets) {
		out.DesignForm = true
	}
	add := func(key string, vault string) error {
		if len(out.Bindings) == maxBindingsPerEntry {
			return badInput(secretBindingWhat, "more than %d bindings", maxBindingsPerEntry)
		}
		out.Bindings = append(out.Bindings, Binding{ServiceSecret: key, VaultSecret: vault})
		return nil
	}
	err := eachMember(in.Bindings, func(key string, val json.RawMessage) error {
		var v vaultSecretJSON
		if err := json.Unmarshal(val, &v); err != nil || v.VaultSecret == nil {
			return badInput(secretBindingWhat, `bindings[%q] must be an object {"vaultSecret": "<name>"}`, key)
		}
		return add(key, *v.VaultSecret)
	})
	if err != nil {
		return err
	}
	if !isNull(in.Secrets) {
		var list []json.RawMessage
		if err := json.Unmarshal(in.Secrets, &list); err != nil {
			return badInput(secretBindingWhat, `"secrets" must be a list of {"<service-secret>": "<vault-secret>"} objects`)
		}
		for i, item := range list {
			err := eachMember(item, func(key string, val json.RawMessage) error {
				var vault string
				if err := json.Unmarshal(val, &vault); err != nil {
					return badInput(secretBindingWhat, "secrets[%d][%q] must be a string naming a vault secret", i, key)
				}
				return add(key, vault)
			})
			if err != nil {
				return err
			}
		}
	}
	*b = out
	return nil
}

// MarshalJSON writes the entry in its form (DesignForm), bindings in
// order. In the design form a service secret bound twice cannot be written
// (a JSON object) and is an error; Open Horizon's form writes one item per
// binding.
func (b SecretBinding) MarshalJSON() ([]byte, error) {
	head := secretBindingJSON{
		ServiceOrgid: b.ServiceOrgid, ServiceURL: b.ServiceURL, ServiceArch: b.ServiceArch,
		ServiceVersionRange: b.ServiceVersionRange, ServiceContainer: b.ServiceContainer,
	}
	if !b.DesignForm || b.EnableNodeLevelSecrets {
		// anax always writes it; the design form has it only when set.
		head.EnableNodeLevelSecrets = &b.EnableNodeLevelSecrets
	}
	var buf bytes.Buffer
	buf.WriteByte('[')
	seen := make(map[string]bool, len(b.Bindings))
	for i, bd := range b.Bindings {
		if i > 0 {
			buf.WriteByte(',')
		}
		k, _ := json.Marshal(bd.ServiceSecret)
		switch {
		case b.DesignForm:
			if seen[bd.ServiceSecret] {
				return nil, fmt.Errorf("binding: secretBinding for %s/%s binds service secret %q twice, which the design form cannot hold", b.ServiceOrgid, b.ServiceURL, bd.ServiceSecret)
			}
			seen[bd.ServiceSecret] = true
			v, _ := json.Marshal(vaultSecretJSON{VaultSecret: &bd.VaultSecret})
			buf.Write(k)
			buf.WriteByte(':')
			buf.Write(v)
		default:
			v, _ := json.Marshal(bd.VaultSecret)
			buf.WriteByte('{')
			buf.Write(k)
			buf.WriteByte(':')
			buf.Write(v)
			buf.WriteByte('}')
		}
	}
	buf.WriteByte(']')
	list := buf.Bytes()
	switch {
	case b.DesignForm:
		list[0], list[len(list)-1] = '{', '}'
		head.Bindings = list
	default:
		head.Secrets = list
	}
	return json.Marshal(head)
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// eachMember calls fn for each member of the JSON object raw, in document
// order, duplicates included. Absent or null raw has no members.
func eachMember(raw json.RawMessage, fn func(key string, val json.RawMessage) error) error {
	if isNull(raw) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return badInput(secretBindingWhat, "expected a JSON object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return badInput(secretBindingWhat, "%s", jsonproblem.Describe(err))
		}
		key, _ := tok.(string) // json.Decoder only yields string keys inside an object
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return badInput(secretBindingWhat, "%s", jsonproblem.Describe(err))
		}
		if err := fn(key, val); err != nil {
			return err
		}
	}
	return nil
}

// serviceVersion is an entry of "serviceVersions" in a pattern or policy.
type serviceVersion struct {
	Version string `json:"version"`
}

// patternJSON is the part of an Open Horizon pattern that secret
// validation reads: the services it deploys and its secret bindings.
type patternJSON struct {
	Services []struct {
		ServiceURL      string           `json:"serviceUrl"`
		ServiceOrgid    string           `json:"serviceOrgid"`
		ServiceArch     string           `json:"serviceArch"`
		ServiceVersions []serviceVersion `json:"serviceVersions"`
	} `json:"services"`
	SecretBinding []SecretBinding `json:"secretBinding,omitempty"`
}

// policyJSON is the part of an Open Horizon deployment policy that secret
// validation reads. The service's "name" is its URL.
type policyJSON struct {
	Service struct {
		Name            string           `json:"name"`
		Org             string           `json:"org"`
		Arch            string           `json:"arch"`
		ServiceVersions []serviceVersion `json:"serviceVersions"`
	} `json:"service"`
	SecretBinding []SecretBinding `json:"secretBinding,omitempty"`
}

// Target is what Validate checks: the top-level services a pattern or
// deployment policy deploys, and its secret bindings. DecodePattern and
// DecodeDeploymentPolicy read it from Open Horizon's documents.
type Target struct {
	// Services are the top-level services. Arch "" or "*" means every
	// architecture the resolver knows; Version "" means the highest version
	// of each architecture. Container is ignored.
	Services []agreement.ServiceRef
	// SecretBindings are the "secretBinding" entries.
	SecretBindings []SecretBinding
}

func versionRefs(org, url, arch string, versions []serviceVersion) []agreement.ServiceRef {
	if len(versions) == 0 {
		return []agreement.ServiceRef{{Org: org, URL: url, Arch: arch}}
	}
	refs := make([]agreement.ServiceRef, 0, len(versions))
	for _, v := range versions {
		refs = append(refs, agreement.ServiceRef{Org: org, URL: url, Arch: arch, Version: v.Version})
	}
	return refs
}

// DecodePattern reads an Open Horizon pattern of at most 1 MiB and returns
// what Validate checks: each service of its "services" once per listed
// version (once, with no version, when it lists none), at most 256 in all,
// and its "secretBinding" entries, at most 1024. Other fields are ignored.
func DecodePattern(r io.Reader) (Target, error) {
	var p patternJSON
	if err := decodeLimited(r, maxDocumentSize, "pattern", &p); err != nil {
		return Target{}, err
	}
	n := 0
	for _, s := range p.Services {
		n += max(len(s.ServiceVersions), 1)
	}
	if n > maxTopLevelServices {
		return Target{}, badInput("pattern", "more than %d service versions", maxTopLevelServices)
	}
	if err := checkBindingCount("pattern", p.SecretBinding); err != nil {
		return Target{}, err
	}
	t := Target{SecretBindings: p.SecretBinding}
	for _, s := range p.Services {
		t.Services = append(t.Services, versionRefs(s.ServiceOrgid, s.ServiceURL, s.ServiceArch, s.ServiceVersions)...)
	}
	return t, nil
}

// DecodeDeploymentPolicy reads an Open Horizon deployment policy of at most
// 1 MiB and returns what Validate checks: its "service" once per listed
// version (once, with no version, when it lists none), at most 256, and its
// "secretBinding" entries, at most 1024. Other fields are ignored.
func DecodeDeploymentPolicy(r io.Reader) (Target, error) {
	var p policyJSON
	if err := decodeLimited(r, maxDocumentSize, "deployment policy", &p); err != nil {
		return Target{}, err
	}
	if len(p.Service.ServiceVersions) > maxTopLevelServices {
		return Target{}, badInput("deployment policy", "more than %d service versions", maxTopLevelServices)
	}
	if err := checkBindingCount("deployment policy", p.SecretBinding); err != nil {
		return Target{}, err
	}
	return Target{
		Services:       versionRefs(p.Service.Org, p.Service.Name, p.Service.Arch, p.Service.ServiceVersions),
		SecretBindings: p.SecretBinding,
	}, nil
}

func checkBindingCount(what string, sb []SecretBinding) error {
	if len(sb) > maxSecretBindings {
		return badInput(what, "more than %d secretBinding entries", maxSecretBindings)
	}
	return nil
}
