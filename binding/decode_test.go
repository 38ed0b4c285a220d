package binding

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/secretstore"
)

func TestDecodeServiceDefinition(t *testing.T) {
	cases := []struct {
		name       string
		json       string
		containers []string
		kind       DeploymentKind
		secrets    map[string]ServiceSecret
	}{
		{
			name: "hzn file form with object deployment and unknown fields",
			json: `{"org":"myorg","url":"com.example.a","version":"1.0.0","arch":"amd64","label":"A","public":true,
				"secrets":{"db":{"type":"basic","description":"database","format":"raw","future":1}},
				"deployment":{"services":{"web":{"image":"web:1"},"worker":{"image":"worker:1"}}}}`,
			containers: []string{"web", "worker"},
			kind:       DeployDevice,
			secrets:    map[string]ServiceSecret{"db": {Type: "basic", Description: "database", Format: FormatRaw}},
		},
		{
			name:       "exchange form with deployment as a JSON string",
			json:       `{"org":"o","url":"u","version":"1","arch":"arm","deployment":"{\"services\":{\"main\":{}}}","clusterDeployment":""}`,
			containers: []string{"main"},
			kind:       DeployDevice,
		},
		{
			name: "cluster only",
			json: `{"org":"o","url":"u","version":"1","arch":"arm","deployment":"","clusterDeployment":"eA=="}`,
			kind: DeployCluster,
		},
		{
			name:       "device and cluster",
			json:       `{"org":"o","url":"u","version":"1","arch":"arm","deployment":{"services":{"c":{}}},"clusterDeployment":{"operatorYamlArchive":"eA=="}}`,
			containers: []string{"c"},
			kind:       DeployMixed,
		},
		{
			name: "no deployment at all",
			json: `{"org":"o","url":"u","version":"1","arch":"arm","deployment":null,"clusterDeployment":{}}`,
			kind: DeployNone,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := DecodeServiceDefinition(strings.NewReader(c.json))
			require.NoError(t, err)
			assert.Equal(t, c.containers, d.Containers())
			assert.Equal(t, c.kind, d.DeploymentKind())
			assert.Equal(t, c.secrets, d.Secrets)
		})
	}
}

func TestDecodeServiceDefinitionRequiredServices(t *testing.T) {
	d, err := DecodeServiceDefinition(strings.NewReader(`{"org":"o","url":"u","version":"1","arch":"amd64",
		"requiredServices":[{"org":"o","url":"dep1","versionRange":"[1,2)","arch":"amd64"},{"org":"o","url":"dep2","version":"1.5"}]}`))
	require.NoError(t, err)
	require.Len(t, d.RequiredServices, 2)
	assert.Equal(t, "[1,2)", d.RequiredServices[0].rangeText())
	assert.Equal(t, "1.5", d.RequiredServices[1].rangeText())
}

func TestDecodeErrors(t *testing.T) {
	many := func(n int, item func(i int) string) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = item(i)
		}
		return strings.Join(parts, ",")
	}
	cases := []struct {
		name    string
		decode  func(string) error
		json    string
		wantErr string
	}{
		{"service syntax", decodeService, `{"org": "o", "secret-value-here`, "syntax error at byte"},
		{"service wrong type", decodeService, `{"org": 5}`, `field "org": expected string, got JSON number`},
		{"service too big", decodeService, `{"x":"` + strings.Repeat("a", MaxServiceDefinitionSize) + `"}`, "larger than"},
		{"too many secrets", decodeService, `{"secrets":{` + many(MaxSecretsPerService+1, func(i int) string { return fmt.Sprintf(`"s%d":{}`, i) }) + `}}`, "more than 256 secrets"},
		{"too many dependencies", decodeService, `{"requiredServices":[` + many(MaxRequiredServices+1, func(int) string { return `{}` }) + `]}`, "requiredServices"},
		{"too many containers", decodeService, `{"deployment":{"services":{` + many(MaxContainers+1, func(i int) string { return fmt.Sprintf(`"c%d":{}`, i) }) + `}}}`, "containers"},
		{"deployment string not JSON", decodeService, `{"deployment":"{services"}`, "deployment"},
		{"deployment of wrong type", decodeService, `{"deployment":[1]}`, "deployment"},
		{"binding value not an object", decodePolicy, `{"secretBinding":[{"bindings":{"db":"name"}}]}`, `bindings["db"] must be an object`},
		{"binding object without vaultSecret", decodePolicy, `{"secretBinding":[{"bindings":{"db":{}}}]}`, `bindings["db"]`},
		{"bindings not an object", decodePolicy, `{"secretBinding":[{"bindings":["db"]}]}`, "expected a JSON object"},
		{"list form value not a string", decodePolicy, `{"secretBinding":[{"secrets":[{"db":{"vaultSecret":"x"}}]}]}`, `secrets[0]["db"] must be a string`},
		{"list form not a list", decodePolicy, `{"secretBinding":[{"secrets":{"db":"x"}}]}`, `"secrets" must be a list`},
		{"list form item not an object", decodePolicy, `{"secretBinding":[{"secrets":["db"]}]}`, "expected a JSON object"},
		{"too many bindings", decodePolicy, `{"secretBinding":[{"secrets":[` + many(MaxBindingsPerEntry+1, func(i int) string { return fmt.Sprintf(`{"s%d":"v"}`, i) }) + `]}]}`, "more than 256 bindings"},
		{"too many entries", decodePolicy, `{"secretBinding":[` + many(MaxSecretBindings+1, func(int) string { return `{}` }) + `]}`, "more than 1024 secretBinding"},
		{"policy too many versions", decodePolicy, `{"service":{"serviceVersions":[` + many(MaxTopLevelServices+1, func(int) string { return `{}` }) + `]}}`, "service versions"},
		{"pattern too many services", decodePattern, `{"services":[` + many(MaxTopLevelServices+1, func(int) string { return `{}` }) + `]}`, "service versions"},
		{"pattern too many entries", decodePattern, `{"secretBinding":[` + many(MaxSecretBindings+1, func(int) string { return `{}` }) + `]}`, "secretBinding entries"},
		{"pattern too big", decodePattern, `"` + strings.Repeat("a", MaxDocumentSize) + `"`, "larger than"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.decode(c.json)
			require.Error(t, err)
			assert.ErrorContains(t, err, c.wantErr)
			assert.ErrorIs(t, err, secretstore.ErrInvalid)
			assert.NotContains(t, err.Error(), "secret-value-here", "errors never quote the input")
		})
	}
}

func decodeService(s string) error {
	_, err := DecodeServiceDefinition(strings.NewReader(s))
	return err
}
func decodePolicy(s string) error  { _, err := DecodeDeploymentPolicy(strings.NewReader(s)); return err }
func decodePattern(s string) error { _, err := DecodePattern(strings.NewReader(s)); return err }

func TestSecretBindingForms(t *testing.T) {
	cases := []struct {
		name string
		json string
		want SecretBinding
	}{
		{
			name: "design form, document order kept",
			json: `{"serviceOrgid":"o","serviceUrl":"u","serviceArch":"amd64","serviceVersionRange":"[1,2)","serviceContainer":"c",
				"bindings":{"zeta":{"vaultSecret":"z"},"alpha":{"vaultSecret":"user/a/x","note":"ignored"}},"unknown":true}`,
			want: SecretBinding{ServiceOrgid: "o", ServiceURL: "u", ServiceArch: "amd64", ServiceVersionRange: "[1,2)", ServiceContainer: "c",
				Bindings: []Binding{{"zeta", "z"}, {"alpha", "user/a/x"}}},
		},
		{
			name: "Open Horizon list form",
			json: `{"serviceOrgid":"o","serviceUrl":"u","serviceArch":"amd64","serviceVersionRange":"[0.0.0,INFINITY)",
				"secrets":[{"api_key":"cloud-api-key"},{"db_password":"user/johndoe/db-password"}]}`,
			want: SecretBinding{ServiceOrgid: "o", ServiceURL: "u", ServiceArch: "amd64", ServiceVersionRange: "[0.0.0,INFINITY)",
				Bindings: []Binding{{"api_key", "cloud-api-key"}, {"db_password", "user/johndoe/db-password"}}},
		},
		{
			name: "both forms, and duplicates kept for the report",
			json: `{"serviceOrgid":"o","serviceUrl":"u","bindings":{"a":{"vaultSecret":"1"},"a":{"vaultSecret":"2"}},"secrets":[{"b":"3","a":"4"}]}`,
			want: SecretBinding{ServiceOrgid: "o", ServiceURL: "u",
				Bindings: []Binding{{"a", "1"}, {"a", "2"}, {"b", "3"}, {"a", "4"}}},
		},
		{
			name: "null bindings and secrets",
			json: `{"serviceOrgid":"o","serviceUrl":"u","bindings":null,"secrets":null}`,
			want: SecretBinding{ServiceOrgid: "o", ServiceURL: "u"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got SecretBinding
			require.NoError(t, json.Unmarshal([]byte(c.json), &got))
			assert.Equal(t, c.want, got)
		})
	}
}

func TestSecretBindingMarshal(t *testing.T) {
	b := SecretBinding{ServiceOrgid: "o", ServiceURL: "u", ServiceArch: "amd64", ServiceVersionRange: "1.0.0",
		Bindings: []Binding{{"zeta", "z"}, {"alpha", "user/a/x"}}}
	out, err := json.Marshal(b)
	require.NoError(t, err)
	assert.JSONEq(t, `{"serviceOrgid":"o","serviceUrl":"u","serviceArch":"amd64","serviceVersionRange":"1.0.0",
		"bindings":{"zeta":{"vaultSecret":"z"},"alpha":{"vaultSecret":"user/a/x"}}}`, string(out))
	assert.Less(t, strings.Index(string(out), "zeta"), strings.Index(string(out), "alpha"), "order kept")
	var back SecretBinding
	require.NoError(t, json.Unmarshal(out, &back))
	assert.Equal(t, b, back)

	b.ServiceContainer = "c"
	b.Bindings = nil
	out, err = json.Marshal(b)
	require.NoError(t, err)
	assert.JSONEq(t, `{"serviceOrgid":"o","serviceUrl":"u","serviceArch":"amd64","serviceVersionRange":"1.0.0","serviceContainer":"c","bindings":{}}`, string(out))

	b.Bindings = []Binding{{"a", "1"}, {"a", "2"}}
	_, err = json.Marshal(b)
	assert.ErrorContains(t, err, `binds service secret "a" twice`)
}

func TestPatternAndPolicyTargets(t *testing.T) {
	p, err := DecodePattern(strings.NewReader(`{"label":"p","services":[
		{"serviceUrl":"u1","serviceOrgid":"o","serviceArch":"amd64","serviceVersions":[{"version":"1.0.0"},{"version":"1.1.0"}]},
		{"serviceUrl":"u2","serviceOrgid":"o","serviceArch":"*"}],
		"secretBinding":[{"serviceOrgid":"o","serviceUrl":"u1","secrets":[{"a":"b"}]}]}`))
	require.NoError(t, err)
	tg := p.Target()
	assert.Equal(t, []ServiceRef{
		{Org: "o", URL: "u1", Arch: "amd64", Version: "1.0.0"},
		{Org: "o", URL: "u1", Arch: "amd64", Version: "1.1.0"},
		{Org: "o", URL: "u2", Arch: "*"},
	}, tg.Services)
	assert.Equal(t, []Binding{{"a", "b"}}, tg.SecretBindings[0].Bindings)

	pol, err := DecodeDeploymentPolicy(strings.NewReader(`{"label":"x","service":{"name":"u","org":"o","arch":"arm64",
		"serviceVersions":[{"version":"2.0.0","priority":{}}],"nodeHealth":{}},"properties":[],
		"secretBinding":[{"serviceOrgid":"o","serviceUrl":"u","bindings":{"a":{"vaultSecret":"b"}}}]}`))
	require.NoError(t, err)
	tg = pol.Target()
	assert.Equal(t, []ServiceRef{{Org: "o", URL: "u", Arch: "arm64", Version: "2.0.0"}}, tg.Services)
	assert.Len(t, tg.SecretBindings, 1)
}

func TestServiceDefinitionRoundTrip(t *testing.T) {
	in := `{"org":"o","url":"u","version":"1.0.0","arch":"amd64","requiredServices":[{"org":"o","url":"d","versionRange":"[1,2)"}],
		"secrets":{"db":{"format":"raw"}},"deployment":"{\"services\":{\"c\":{\"image\":\"x\"}}}","clusterDeployment":{"operatorYamlArchive":"eA=="}}`
	d, err := DecodeServiceDefinition(strings.NewReader(in))
	require.NoError(t, err)
	out, err := json.Marshal(d)
	require.NoError(t, err)
	back, err := DecodeServiceDefinition(strings.NewReader(string(out)))
	require.NoError(t, err)
	assert.Equal(t, d, back)
	assert.Equal(t, DeployMixed, back.DeploymentKind())
}

// Fuzz tests: no panic, bounded work, and what decodes re-encodes.

func FuzzDecodeServiceDefinition(f *testing.F) {
	f.Add(`{"org":"o","url":"u","version":"1","arch":"a","secrets":{"s":{"format":"raw"}},"deployment":{"services":{"c":{}}}}`)
	f.Add(`{"deployment":"{\"services\":{\"c\":{}}}","clusterDeployment":"x"}`)
	f.Add(`{"deployment":"","requiredServices":[{"org":"o","url":"d","version":"1"}]}`)
	f.Add(`{"deployment":"\"nested\""}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, s string) {
		d, err := DecodeServiceDefinition(strings.NewReader(s))
		if err != nil {
			require.ErrorIs(t, err, secretstore.ErrInvalid)
			return
		}
		require.LessOrEqual(t, len(d.Secrets), MaxSecretsPerService)
		require.LessOrEqual(t, len(d.Containers()), MaxContainers)
		_ = d.DeploymentKind()
		_ = ValidateService(d)
		out, err := json.Marshal(d)
		require.NoError(t, err)
		_, err = DecodeServiceDefinition(strings.NewReader(string(out)))
		require.NoError(t, err)
	})
}

func FuzzDecodeSecretBindings(f *testing.F) {
	f.Add(`{"secretBinding":[{"serviceOrgid":"o","serviceUrl":"u","bindings":{"a":{"vaultSecret":"b"}}}]}`)
	f.Add(`{"secretBinding":[{"serviceOrgid":"o","serviceUrl":"u","secrets":[{"a":"b"},{"c":"d","e":"f"}]}]}`)
	f.Add(`{"secretBinding":[{"bindings":{"a":{"vaultSecret":"b"},"a":{"vaultSecret":"c"}}}]}`)
	f.Add(`{"service":{"name":"u","org":"o","serviceVersions":[{"version":"1"}]},"secretBinding":null}`)
	f.Add(`{"secretBinding":[{"secrets":[[]]}]}`)
	f.Fuzz(func(t *testing.T, s string) {
		for _, decode := range []func(string) (Target, error){
			func(s string) (Target, error) {
				p, err := DecodeDeploymentPolicy(strings.NewReader(s))
				if err != nil {
					return Target{}, err
				}
				return p.Target(), nil
			},
			func(s string) (Target, error) {
				p, err := DecodePattern(strings.NewReader(s))
				if err != nil {
					return Target{}, err
				}
				return p.Target(), nil
			},
		} {
			tg, err := decode(s)
			if err != nil {
				require.ErrorIs(t, err, secretstore.ErrInvalid)
				continue
			}
			require.LessOrEqual(t, len(tg.SecretBindings), MaxSecretBindings)
			for _, sb := range tg.SecretBindings {
				require.LessOrEqual(t, len(sb.Bindings), MaxBindingsPerEntry)
				out, err := json.Marshal(sb)
				if err != nil {
					require.ErrorContains(t, err, "twice")
					continue
				}
				var back SecretBinding
				require.NoError(t, json.Unmarshal(out, &back))
				require.Equal(t, sb, back)
			}
		}
	})
}
