package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/internal/testkit/logtest"
	"github.com/edgesecrets/edgesecrets/relay"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

func put(t *testing.T, store *secretstore.Store, name, value string) {
	t.Helper()
	_, err := store.Put(t.Context(), &secretstore.Secret{Name: name, Data: edgesecrets.Data{"value": []byte(value)}}, secretstore.PutOptions{})
	require.NoError(t, err)
}

// The sample deployment loads, validates against the store, and resolves
// to the bindings the delivery engine is given; while its secret is
// missing, that is the only problem.
func TestSampleDeployment(t *testing.T) {
	dep, err := loadDeployment("deployment.json")
	require.NoError(t, err)
	assert.Equal(t, "myorg", dep.org)
	store := memory.New()
	checker, err := binding.NewStoreChecker(store, dep.org)
	require.NoError(t, err)
	validate := func() *binding.Report {
		report, err := binding.Validate(t.Context(), dep.target, binding.Options{Resolver: dep.catalog, Checker: checker})
		require.NoError(t, err)
		return report
	}

	report := validate()
	require.Len(t, report.Errors(), 1)
	assert.Equal(t, binding.CodeVaultSecretMissing, report.Errors()[0].Code)
	assert.Equal(t, "web/api-key", report.Errors()[0].VaultSecret)

	put(t, store, "myorg/web/api-key", "v")
	report = validate()
	require.NoError(t, report.Err(), "%v", report.Problems)
	bindings, err := report.Bindings(dep.org, "node-1")
	require.NoError(t, err)
	assert.Equal(t, []binding.ServiceBinding{{
		Service: agreement.ServiceRef{Org: "myorg", URL: "com.example.web", Arch: "amd64", Version: "1.0.0", Container: "web"},
		Secrets: map[string]binding.BoundSecret{"api_key": {StoreNames: []string{"myorg/web/api-key"}, Format: agreement.FormatRaw}},
	}}, bindings)
}

func sampleFile(t *testing.T) deploymentFile {
	t.Helper()
	f, err := os.Open("deployment.json")
	require.NoError(t, err)
	defer f.Close()
	var df deploymentFile
	require.NoError(t, json.NewDecoder(f).Decode(&df))
	return df
}

func TestDeploymentFileErrors(t *testing.T) {
	sample := sampleFile(t)
	for _, tc := range []struct {
		name string
		edit func(*deploymentFile)
		want []string
	}{
		{"everything missing", func(df *deploymentFile) { *df = deploymentFile{} }, []string{"org:", "services: none given", "deploymentPolicy or pattern: missing"}},
		{"both kinds", func(df *deploymentFile) { df.Pattern = json.RawMessage(`{"services":[]}`) }, []string{"not both"}},
		{"bad org and service", func(df *deploymentFile) {
			df.Org = "a/b"
			df.Services = append(df.Services, json.RawMessage(`{"org": 7}`))
		}, []string{"org:", "services[1]:"}},
		{"bad policy", func(df *deploymentFile) { df.DeploymentPolicy = json.RawMessage(`{"service": "x"}`) }, []string{"deploymentPolicy:"}},
		{"duplicate service", func(df *deploymentFile) { df.Services = append(df.Services, df.Services[0]) }, []string{"services:"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			df := sample
			df.Services = slices.Clone(sample.Services)
			tc.edit(&df)
			_, err := df.decode()
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
	_, err := loadDeployment(filepath.Join(t.TempDir(), "none.json"))
	assert.Error(t, err)
	path := filepath.Join(t.TempDir(), "d.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"org": "myorg", "unknown": 1}`), 0o600))
	_, err = loadDeployment(path)
	assert.ErrorContains(t, err, "unknown field")
}

func TestAdminHandler(t *testing.T) {
	store := memory.New()
	log, logs := logtest.NewLogger()
	srv := httptest.NewServer(http.StripPrefix("", &adminHandler{store: store, token: "admin-token", log: log}))
	t.Cleanup(srv.Close)
	call := func(method, path, token, body string) (int, string) {
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}

	status, _ := call(http.MethodPut, "/admin/secrets/myorg/db", "", `{"password":"VALUE-1"}`)
	assert.Equal(t, http.StatusUnauthorized, status)
	status, _ = call(http.MethodPut, "/admin/secrets/myorg/db", "wrong", `{"password":"VALUE-1"}`)
	assert.Equal(t, http.StatusUnauthorized, status)
	_, err := store.Get(t.Context(), "myorg/db")
	require.ErrorIs(t, err, edgesecrets.ErrNotFound, "refused requests write nothing")

	status, body := call(http.MethodPut, "/admin/secrets/myorg/db", "admin-token", `{"password":"VALUE-1"}`)
	assert.Equal(t, http.StatusOK, status)
	assert.JSONEq(t, `{"changed":true}`, body)
	s, err := store.Get(t.Context(), "myorg/db")
	require.NoError(t, err)
	assert.Equal(t, "VALUE-1", string(s.Data["password"]))
	_, body = call(http.MethodPut, "/admin/secrets/myorg/db", "admin-token", `{"password":"VALUE-1"}`)
	assert.JSONEq(t, `{"changed":false}`, body)

	for _, tc := range []struct {
		name, method, path, body string
		status                   int
	}{
		{"not JSON", http.MethodPut, "/admin/secrets/myorg/x", `VALUE-2`, http.StatusBadRequest},
		{"not strings", http.MethodPut, "/admin/secrets/myorg/x", `{"k": 1}`, http.StatusBadRequest},
		{"empty", http.MethodPut, "/admin/secrets/myorg/x", `{}`, http.StatusBadRequest},
		{"empty key", http.MethodPut, "/admin/secrets/myorg/x", `{"": "VALUE-2"}`, http.StatusBadRequest},
		{"too large", http.MethodPut, "/admin/secrets/myorg/x", `{"k": "` + strings.Repeat("V", maxAdminBody) + `"}`, http.StatusBadRequest},
		{"bad name", http.MethodPut, "/admin/secrets/myorg//x", `{"k": "VALUE-2"}`, http.StatusBadRequest},
		{"no name", http.MethodDelete, "/admin/secrets/", ``, http.StatusBadRequest},
		{"method", http.MethodGet, "/admin/secrets/myorg/db", ``, http.StatusMethodNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := call(tc.method, tc.path, "admin-token", tc.body)
			assert.Equal(t, tc.status, status, body)
			assert.NotContains(t, body, "VALUE-")
		})
	}

	status, _ = call(http.MethodDelete, "/admin/secrets/myorg/db", "admin-token", "")
	assert.Equal(t, http.StatusNoContent, status)
	_, err = store.Get(t.Context(), "myorg/db")
	assert.ErrorIs(t, err, edgesecrets.ErrNotFound)
	assert.NotContains(t, logs.String(), "VALUE-")
	assert.Contains(t, logs.String(), "myorg/db")
}

func TestPreload(t *testing.T) {
	store := memory.New()
	log, logs := logtest.NewLogger()
	path := filepath.Join(t.TempDir(), "preload.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"myorg/a": {"k": "VALUE-a"}, "myorg/b": {"user": "u", "password": "VALUE-b"}}`), 0o600))
	require.NoError(t, preload(t.Context(), store, path, log))
	names, err := store.List(t.Context(), "")
	require.NoError(t, err)
	assert.Equal(t, []string{"myorg/a", "myorg/b"}, names)
	s, err := store.Get(t.Context(), "myorg/b")
	require.NoError(t, err)
	assert.Equal(t, "VALUE-b", string(s.Data["password"]))
	assert.NotContains(t, logs.String(), "VALUE-")

	require.NoError(t, os.WriteFile(path, []byte(`{"myorg/c": {"k": 7}}`), 0o600))
	err = preload(t.Context(), store, path, log)
	assert.ErrorContains(t, err, `secret "myorg/c"`)
	require.NoError(t, os.WriteFile(path, []byte(`{"../c": {"k": "VALUE-c"}}`), 0o600))
	err = preload(t.Context(), store, path, log)
	require.ErrorIs(t, err, edgesecrets.ErrInvalid)
	assert.NotContains(t, err.Error(), "VALUE-")
}

func FuzzDecodeData(f *testing.F) {
	f.Add([]byte(`{"password":"pw","user":"u"}`))
	f.Add([]byte(`{"":"x"}`))
	f.Add([]byte(`{"k":"\u0000\ud800"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		data, err := decodeData(bytes.NewReader(b), maxAdminBody)
		if err != nil {
			if len(b) >= 16 { // shorter inputs may match the error's own words
				assert.NotContains(t, err.Error(), string(b), "errors never quote the body")
			}
			return
		}
		require.NotEmpty(t, data)
		for k := range data {
			require.NotEmpty(t, k)
		}
	})
}

func FuzzDeploymentFile(f *testing.F) {
	sample, err := os.ReadFile("deployment.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(sample)
	f.Add([]byte(`{"org":"myorg","services":[{}],"pattern":{"services":[]}}`))
	f.Add([]byte(`{"org":"..","services":[],"deploymentPolicy":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(t.TempDir(), "d.json")
		require.NoError(t, os.WriteFile(path, b, 0o600))
		d, err := loadDeployment(path)
		if err != nil {
			return
		}
		require.NotEmpty(t, d.org)
		require.NotNil(t, d.catalog)
	})
}

// -state picks the delivery engine's state: the file in -dir by default
// (with the identity records in it), another file, or memory.
func TestOpenState(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	cases := []struct {
		state, file string
		memory      bool
	}{
		{state: "", file: filepath.Join(dir, stateFile)},
		{state: filepath.Join(dir, "elsewhere", "state.db"), file: filepath.Join(dir, "elsewhere", "state.db")},
		{state: "memory", memory: true},
	}
	for _, c := range cases {
		t.Run(c.state, func(t *testing.T) {
			st, certs, desc, err := openState(t.Context(), config{dir: dir, state: c.state}, log)
			require.NoError(t, err)
			isMemory := desc == "memory"
			assert.Equal(t, c.memory, isMemory)
			rec := identity.Record{Instance: identity.Identity{Provider: "p", Org: "o", Node: "n", InstanceID: "i-" + c.state}}
			_, err = certs.Put(t.Context(), rec)
			require.NoError(t, err)
			require.NoError(t, st.Close())

			st, certs, _, err = openState(t.Context(), config{dir: dir, state: c.state}, log)
			require.NoError(t, err)
			defer st.Close()
			_, err = certs.Get(t.Context(), "p", rec.Instance.InstanceID)
			assert.Equal(t, c.memory, errors.Is(err, edgesecrets.ErrNotFound), "a state file keeps the identity records too")
			if c.file != "" {
				assert.Equal(t, c.file, desc)
				fi, err := os.Stat(c.file)
				require.NoError(t, err)
				assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
			}
		})
	}
}

// reload replaces the deployment only with a file that decodes and names
// the agbot's organisation; otherwise the agbot keeps the one it had.
func TestReloadKeepsTheDeploymentOnABadFile(t *testing.T) {
	dep, err := loadDeployment("deployment.json")
	require.NoError(t, err)
	d := &deployments{current: dep}
	dir := t.TempDir()
	write := func(df deploymentFile) string {
		b, err := json.Marshal(map[string]any{"org": df.Org, "services": df.Services, "deploymentPolicy": df.DeploymentPolicy})
		require.NoError(t, err)
		path := filepath.Join(dir, "deployment.json")
		require.NoError(t, os.WriteFile(path, b, 0o600))
		return path
	}

	other := sampleFile(t)
	other.Org = "otherorg"
	err = d.reload(write(other))
	assert.ErrorContains(t, err, `org "otherorg" is not the agbot's "myorg"`)
	assert.Same(t, dep, d.get(), "another organisation changes nothing")

	broken := sampleFile(t)
	broken.Services = nil
	err = d.reload(write(broken))
	assert.ErrorContains(t, err, "services: none given")
	assert.Same(t, dep, d.get(), "a file that does not decode changes nothing")

	require.NoError(t, d.reload(write(sampleFile(t))))
	assert.NotSame(t, dep, d.get(), "a good file replaces the deployment")
	_, ok := d.deploy(t.Context(), relay.Node{Org: "otherorg", Node: "n"})
	assert.False(t, ok, "nodes of another organisation get nothing")
	got, ok := d.deploy(t.Context(), relay.Node{Org: "myorg", Node: "n"})
	assert.True(t, ok)
	assert.Equal(t, d.get().target, got.Target)
}
