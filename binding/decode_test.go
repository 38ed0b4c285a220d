package binding

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
)

func TestDecodeServiceDefinition(t *testing.T) {
	cases := []struct {
		name       string
		json       string
		containers []string
		kind       deploymentKind
		secrets    map[string]ServiceSecret
	}{
		{
			name: "hzn file form with object deployment and unknown fields",
			json: `{"org":"myorg","url":"com.example.a","version":"1.0.0","arch":"amd64","label":"A","public":true,
				"secrets":{"db":{"type":"basic","description":"database","format":"raw","future":1}},
				"deployment":{"services":{"web":{"image":"web:1"},"worker":{"image":"worker:1"}}}}`,
			containers: []string{"web", "worker"},
			kind:       deployDevice,
			secrets:    map[string]ServiceSecret{"db": {Type: "basic", Description: "database", Format: agreement.FormatRaw}},
		},
		{
			name:       "exchange form with deployment as a JSON string",
			json:       `{"org":"o","url":"u","version":"1","arch":"arm","deployment":"{\"services\":{\"main\":{}}}","clusterDeployment":""}`,
			containers: []string{"main"},
			kind:       deployDevice,
		},
		{
			name: "cluster only",
			json: `{"org":"o","url":"u","version":"1","arch":"arm","deployment":"","clusterDeployment":"{\"operatorYamlArchive\":\"eA==\"}"}`,
			kind: deployCluster,
		},
		{
			name:       "device and cluster",
			json:       `{"org":"o","url":"u","version":"1","arch":"arm","deployment":{"services":{"c":{}}},"clusterDeployment":{"operatorYamlArchive":"eA=="}}`,
			containers: []string{"c"},
			kind:       deployMixed,
		},
		{
			name: "no deployment at all",
			json: `{"org":"o","url":"u","version":"1","arch":"arm","deployment":null,"clusterDeployment":{}}`,
			kind: deployNone,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := DecodeServiceDefinition(strings.NewReader(c.json))
			require.NoError(t, err)
			assert.Equal(t, c.containers, d.containers())
			assert.Equal(t, c.kind, d.kind())
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
		{"service too big", decodeService, `{"x":"` + strings.Repeat("a", maxServiceDefinitionSize) + `"}`, "larger than"},
		{"too many secrets", decodeService, `{"secrets":{` + many(maxSecretsPerService+1, func(i int) string { return fmt.Sprintf(`"s%d":{}`, i) }) + `}}`, "more than 256 secrets"},
		{"too many dependencies", decodeService, `{"requiredServices":[` + many(maxRequiredServices+1, func(int) string { return `{}` }) + `]}`, "requiredServices"},
		{"too many containers", decodeService, `{"deployment":{"services":{` + many(maxContainers+1, func(i int) string { return fmt.Sprintf(`"c%d":{}`, i) }) + `}}}`, "containers"},
		{"deployment string not JSON", decodeService, `{"deployment":"{services"}`, "deployment"},
		{"deployment of wrong type", decodeService, `{"deployment":[1]}`, "deployment"},
		{"cluster deployment string not JSON", decodeService, `{"clusterDeployment":"eA=="}`, "clusterDeployment: syntax error"},
		{"container of wrong type", decodeService, `{"deployment":{"services":{"web":5}}}`, `container "web"`},
		{"container with an empty name", decodeService, `{"deployment":{"services":{"":{}}}}`, "empty name"},
		{"container secrets of wrong type", decodeService, `{"deployment":{"services":{"web":{"secrets":["a"]}}}}`, `container "web" secrets`},
		{"too many container secrets", decodeService, `{"deployment":{"services":{"web":{"secrets":{` + many(maxSecretsPerService+1, func(i int) string { return fmt.Sprintf(`"s%d":{}`, i) }) + `}}}}}`, `container "web": more than 256 secrets`},
		{"cluster secrets of wrong type", decodeService, `{"clusterDeployment":{"secrets":{"a":"b"}}}`, "clusterDeployment secrets"},
		{"binding value not an object", decodePolicy, `{"secretBinding":[{"bindings":{"db":"name"}}]}`, `bindings["db"] must be an object`},
		{"binding object without vaultSecret", decodePolicy, `{"secretBinding":[{"bindings":{"db":{}}}]}`, `bindings["db"]`},
		{"bindings not an object", decodePolicy, `{"secretBinding":[{"bindings":["db"]}]}`, "expected a JSON object"},
		{"list form value not a string", decodePolicy, `{"secretBinding":[{"secrets":[{"db":{"vaultSecret":"x"}}]}]}`, `secrets[0]["db"] must be a string`},
		{"list form not a list", decodePolicy, `{"secretBinding":[{"secrets":{"db":"x"}}]}`, `"secrets" must be a list`},
		{"list form item not an object", decodePolicy, `{"secretBinding":[{"secrets":["db"]}]}`, "expected a JSON object"},
		{"too many bindings", decodePolicy, `{"secretBinding":[{"secrets":[` + many(maxBindingsPerEntry+1, func(i int) string { return fmt.Sprintf(`{"s%d":"v"}`, i) }) + `]}]}`, "more than 256 bindings"},
		{"too many entries", decodePolicy, `{"secretBinding":[` + many(maxSecretBindings+1, func(int) string { return `{}` }) + `]}`, "more than 1024 secretBinding"},
		{"policy too many versions", decodePolicy, `{"service":{"serviceVersions":[` + many(maxTopLevelServices+1, func(int) string { return `{}` }) + `]}}`, "service versions"},
		{"pattern too many services", decodePattern, `{"services":[` + many(maxTopLevelServices+1, func(int) string { return `{}` }) + `]}`, "service versions"},
		{"pattern too many entries", decodePattern, `{"secretBinding":[` + many(maxSecretBindings+1, func(int) string { return `{}` }) + `]}`, "secretBinding entries"},
		{"pattern too big", decodePattern, `"` + strings.Repeat("a", maxDocumentSize) + `"`, "larger than"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.decode(c.json)
			require.Error(t, err)
			assert.ErrorContains(t, err, c.wantErr)
			assert.ErrorIs(t, err, edgesecrets.ErrInvalid)
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
				Bindings: []Binding{{"zeta", "z"}, {"alpha", "user/a/x"}}, DesignForm: true},
		},
		{
			name: "Open Horizon list form",
			json: `{"serviceOrgid":"o","serviceUrl":"u","serviceArch":"amd64","serviceVersionRange":"[0.0.0,INFINITY)",
				"secrets":[{"api_key":"cloud-api-key"},{"db_password":"user/johndoe/db-password"}]}`,
			want: SecretBinding{ServiceOrgid: "o", ServiceURL: "u", ServiceArch: "amd64", ServiceVersionRange: "[0.0.0,INFINITY)",
				Bindings: []Binding{{"api_key", "cloud-api-key"}, {"db_password", "user/johndoe/db-password"}}},
		},
		{
			name: "Open Horizon form with enableNodeLevelSecrets and several members in one item",
			json: `{"serviceOrgid":"o","serviceUrl":"u","enableNodeLevelSecrets":true,"secrets":[{"b":"2","a":"1"}]}`,
			want: SecretBinding{ServiceOrgid: "o", ServiceURL: "u", EnableNodeLevelSecrets: true, Bindings: []Binding{{"b", "2"}, {"a", "1"}}},
		},
		{
			name: "design form with enableNodeLevelSecrets",
			json: `{"serviceOrgid":"o","serviceUrl":"u","enableNodeLevelSecrets":true,"bindings":{"a":{"vaultSecret":"1"}}}`,
			want: SecretBinding{ServiceOrgid: "o", ServiceURL: "u", EnableNodeLevelSecrets: true, Bindings: []Binding{{"a", "1"}}, DesignForm: true},
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
		Bindings: []Binding{{"zeta", "z"}, {"alpha", "user/a/x"}}, DesignForm: true}
	cases := []struct {
		name    string
		change  func(*SecretBinding)
		want    string
		wantErr string
	}{
		{name: "design form", want: `{"serviceOrgid":"o","serviceUrl":"u","serviceArch":"amd64","serviceVersionRange":"1.0.0",
			"bindings":{"zeta":{"vaultSecret":"z"},"alpha":{"vaultSecret":"user/a/x"}}}`},
		{name: "design form with enableNodeLevelSecrets", change: func(b *SecretBinding) { b.EnableNodeLevelSecrets = true },
			want: `{"serviceOrgid":"o","serviceUrl":"u","serviceArch":"amd64","serviceVersionRange":"1.0.0","enableNodeLevelSecrets":true,
			"bindings":{"zeta":{"vaultSecret":"z"},"alpha":{"vaultSecret":"user/a/x"}}}`},
		{name: "design form without bindings", change: func(b *SecretBinding) { b.ServiceContainer, b.Bindings = "c", nil },
			want: `{"serviceOrgid":"o","serviceUrl":"u","serviceArch":"amd64","serviceVersionRange":"1.0.0","serviceContainer":"c","bindings":{}}`},
		{name: "design form cannot bind a secret twice", change: func(b *SecretBinding) { b.Bindings = []Binding{{"a", "1"}, {"a", "2"}} },
			wantErr: `binds service secret "a" twice`},
		{name: "Open Horizon form, as anax writes it", change: func(b *SecretBinding) { b.DesignForm = false },
			want: `{"serviceOrgid":"o","serviceUrl":"u","serviceArch":"amd64","serviceVersionRange":"1.0.0","enableNodeLevelSecrets":false,
			"secrets":[{"zeta":"z"},{"alpha":"user/a/x"}]}`},
		{name: "Open Horizon form binds a secret twice", change: func(b *SecretBinding) {
			b.DesignForm, b.EnableNodeLevelSecrets, b.Bindings = false, true, []Binding{{"a", "1"}, {"a", "2"}}
		}, want: `{"serviceOrgid":"o","serviceUrl":"u","serviceArch":"amd64","serviceVersionRange":"1.0.0","enableNodeLevelSecrets":true,
			"secrets":[{"a":"1"},{"a":"2"}]}`},
		{name: "Open Horizon form without bindings", change: func(b *SecretBinding) { b.DesignForm, b.Bindings = false, nil },
			want: `{"serviceOrgid":"o","serviceUrl":"u","serviceArch":"amd64","serviceVersionRange":"1.0.0","enableNodeLevelSecrets":false,"secrets":[]}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := b
			if c.change != nil {
				c.change(&in)
			}
			out, err := json.Marshal(in)
			if c.wantErr != "" {
				assert.ErrorContains(t, err, c.wantErr)
				return
			}
			require.NoError(t, err)
			assert.JSONEq(t, c.want, string(out))
			if len(in.Bindings) == 2 {
				first, second := strings.Index(string(out), `"`+in.Bindings[0].VaultSecret+`"`), strings.LastIndex(string(out), `"`+in.Bindings[1].VaultSecret+`"`)
				assert.Less(t, first, second, "order kept")
			}
			var back SecretBinding
			require.NoError(t, json.Unmarshal(out, &back))
			assert.Equal(t, in, back, "decoding gives the same entry, form included")
		})
	}
}

func TestPatternAndPolicyTargets(t *testing.T) {
	p, err := DecodePattern(strings.NewReader(`{"label":"p","services":[
		{"serviceUrl":"u1","serviceOrgid":"o","serviceArch":"amd64","serviceVersions":[{"version":"1.0.0"},{"version":"1.1.0"}]},
		{"serviceUrl":"u2","serviceOrgid":"o","serviceArch":"*"}],
		"secretBinding":[{"serviceOrgid":"o","serviceUrl":"u1","secrets":[{"a":"b"}]}]}`))
	require.NoError(t, err)
	tg := p
	assert.Equal(t, []agreement.ServiceRef{
		{Org: "o", URL: "u1", Arch: "amd64", Version: "1.0.0"},
		{Org: "o", URL: "u1", Arch: "amd64", Version: "1.1.0"},
		{Org: "o", URL: "u2", Arch: "*"},
	}, tg.Services)
	assert.Equal(t, []Binding{{"a", "b"}}, tg.SecretBindings[0].Bindings)

	pol, err := DecodeDeploymentPolicy(strings.NewReader(`{"label":"x","service":{"name":"u","org":"o","arch":"arm64",
		"serviceVersions":[{"version":"2.0.0","priority":{}}],"nodeHealth":{}},"properties":[],
		"secretBinding":[{"serviceOrgid":"o","serviceUrl":"u","bindings":{"a":{"vaultSecret":"b"}}}]}`))
	require.NoError(t, err)
	tg = pol
	assert.Equal(t, []agreement.ServiceRef{{Org: "o", URL: "u", Arch: "arm64", Version: "2.0.0"}}, tg.Services)
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
	assert.Equal(t, deployMixed, back.kind())
}

// Fuzz tests: no panic, bounded work, and what decodes re-encodes.

// addFixtureSeeds adds the Open Horizon fixtures matching pattern (a glob
// under testdata/openhorizon) as seeds, placeholders substituted.
func addFixtureSeeds(f *testing.F, pattern string) {
	files, err := filepath.Glob(filepath.Join(ohDir, pattern))
	require.NoError(f, err)
	require.NotEmpty(f, files)
	vars := ohVars(f, map[string]string{"VERS": "1.0.0"})
	for _, file := range files {
		rel, err := filepath.Rel(ohDir, file)
		require.NoError(f, err)
		f.Add(expandOH(f, rel, vars))
	}
}

// FuzzDecodeServiceDefinition: no panic, bounded work, and decode → encode
// → decode gives the same definition (secrets of every place, containers'
// other configuration, cluster deployment).
func FuzzDecodeServiceDefinition(f *testing.F) {
	f.Add(`{"org":"o","url":"u","version":"1","arch":"a","secrets":{"s":{"format":"raw"}},"deployment":{"services":{"c":{}}}}`)
	f.Add(`{"deployment":"{\"services\":{\"c\":{\"image\":\"<x>\",\"secrets\":{\"s\":{\"format\":\"value_only\"}}}}}","clusterDeployment":"{\"secrets\":{\"k\":{}}}"}`)
	f.Add(`{"deployment":"","requiredServices":[{"org":"o","url":"d","version":"1"}]}`)
	f.Add(`{"deployment":{"services":{"c":null,"d":{"secrets":null,"binds":[ 1, {"a" : "\u2028"} ]}}},"clusterDeployment":{"operatorYamlArchive":"x","secrets":{}}}`)
	f.Add(`{"deployment":"\"nested\""}`)
	f.Add(`[]`)
	addFixtureSeeds(f, "*/*/*.json")
	addFixtureSeeds(f, "anax/service_defs/*/*.json")
	f.Fuzz(func(t *testing.T, s string) {
		d, err := DecodeServiceDefinition(strings.NewReader(s))
		if err != nil {
			require.ErrorIs(t, err, edgesecrets.ErrInvalid)
			return
		}
		require.LessOrEqual(t, len(d.Secrets), maxSecretsPerService)
		require.LessOrEqual(t, len(d.containers()), maxContainers)
		_ = d.kind()
		_ = ValidateService(d)
		out, err := json.Marshal(d)
		require.NoError(t, err)
		back, err := DecodeServiceDefinition(strings.NewReader(string(out)))
		require.NoError(t, err)
		require.Equal(t, d, back)
	})
}

// FuzzDecodeSecretBindings: no panic, bounded work, and each entry's decode
// → encode → decode keeps its form (Open Horizon's "secrets" list or the
// design's "bindings" object) and its content.
func FuzzDecodeSecretBindings(f *testing.F) {
	f.Add(`{"secretBinding":[{"serviceOrgid":"o","serviceUrl":"u","bindings":{"a":{"vaultSecret":"b"}}}]}`)
	f.Add(`{"secretBinding":[{"serviceOrgid":"o","serviceUrl":"u","secrets":[{"a":"b"},{"c":"d","e":"f"}]}]}`)
	f.Add(`{"secretBinding":[{"serviceOrgid":"o","serviceUrl":"u","enableNodeLevelSecrets":true,"secrets":[{"a":"b"},{"a":"c"}]}]}`)
	f.Add(`{"secretBinding":[{"enableNodeLevelSecrets":true,"serviceContainer":"c","bindings":{"a":{"vaultSecret":"b"}}}]}`)
	f.Add(`{"secretBinding":[{"bindings":{"a":{"vaultSecret":"b"},"a":{"vaultSecret":"c"}}}]}`)
	f.Add(`{"secretBinding":[{"bindings":{"a":{"vaultSecret":"b"}},"secrets":[{"c":"d"}]}]}`)
	f.Add(`{"service":{"name":"u","org":"o","serviceVersions":[{"version":"1"}]},"secretBinding":null}`)
	f.Add(`{"secretBinding":[{"secrets":[[]]}]}`)
	addFixtureSeeds(f, "anax/patterns/*.json")
	addFixtureSeeds(f, "anax/deployment_policies/*.json")
	addFixtureSeeds(f, "examples/helloSecretWorld/*.json")
	f.Fuzz(func(t *testing.T, s string) {
		for _, decode := range []func(string) (Target, error){
			func(s string) (Target, error) {
				p, err := DecodeDeploymentPolicy(strings.NewReader(s))
				if err != nil {
					return Target{}, err
				}
				return p, nil
			},
			func(s string) (Target, error) {
				p, err := DecodePattern(strings.NewReader(s))
				if err != nil {
					return Target{}, err
				}
				return p, nil
			},
		} {
			tg, err := decode(s)
			if err != nil {
				require.ErrorIs(t, err, edgesecrets.ErrInvalid)
				continue
			}
			require.LessOrEqual(t, len(tg.SecretBindings), maxSecretBindings)
			for _, sb := range tg.SecretBindings {
				require.LessOrEqual(t, len(sb.Bindings), maxBindingsPerEntry)
				out, err := json.Marshal(sb)
				if err != nil {
					require.True(t, sb.DesignForm, "only the design form cannot hold a secret bound twice")
					require.ErrorContains(t, err, "twice")
					continue
				}
				var members map[string]json.RawMessage
				require.NoError(t, json.Unmarshal(out, &members))
				_, list := members["secrets"]
				_, object := members["bindings"]
				require.Equal(t, !sb.DesignForm, list && !object, "written in its form")
				var back SecretBinding
				require.NoError(t, json.Unmarshal(out, &back))
				require.Equal(t, sb, back)
			}
		}
	})
}
