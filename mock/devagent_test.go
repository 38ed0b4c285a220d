package mock_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/mock"
)

// devAgentWriteFiles writes local secret files and returns their paths.
func devAgentWriteFiles(t *testing.T, files map[string][]byte) []string {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for name, content := range files {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, content, 0o600))
		paths = append(paths, p)
	}
	return paths
}

// devAgentCall sends one request to the dev agent as its instance.
func devAgentCall(t *testing.T, a *mock.DevAgent, method, path, token string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, a.URL+path, nil)
	require.NoError(t, err)
	req.SetBasicAuth(a.InstanceID, token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, body
}

func devAgentDetails(t *testing.T, body []byte, name string) []byte {
	t.Helper()
	var m map[string]struct{ Details string }
	require.NoError(t, json.Unmarshal(body, &m))
	b, err := base64.StdEncoding.DecodeString(m[name].Details)
	require.NoError(t, err)
	return b
}

func TestDevAgentServesLocalFiles(t *testing.T) {
	ctx := context.Background()
	password := []byte(`{"user":"dev","password":"local"}`)
	cert := []byte{0x30, 0x82, 0xff, 0x00, 0x01}
	a, err := mock.NewDevAgent(ctx, mock.DevAgentOptions{
		SecretFiles: devAgentWriteFiles(t, map[string][]byte{"password": password, "cert.der": cert}),
		StatusFiles: true,
	})
	require.NoError(t, err)
	defer a.Close()

	// The mount holds the files byte for byte.
	assert.Equal(t, password, mustReadFile(t, filepath.Join(a.MountSource, "password")))
	assert.Equal(t, cert, mustReadFile(t, filepath.Join(a.MountSource, "cert.der")))
	assert.FileExists(t, filepath.Join(a.StatusDir, "SECRETS_PROVIDED"))

	status, body := devAgentCall(t, a, "GET", "/secrets/cert.der", a.Token())
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, cert, devAgentDetails(t, body, "cert.der"))
	status, _ = devAgentCall(t, a, "GET", "/secrets", a.Token())
	assert.Equal(t, http.StatusNotFound, status, "nothing updated yet")
	status, _ = devAgentCall(t, a, "GET", "/secrets", "wrong")
	assert.Equal(t, http.StatusUnauthorized, status)

	// A simulated update.
	changed, err := a.UpdateSecret(ctx, "password", []byte(`{"user":"dev","password":"rotated"}`))
	require.NoError(t, err)
	assert.True(t, changed)
	status, body = devAgentCall(t, a, "GET", "/secrets", a.Token())
	require.Equal(t, http.StatusOK, status)
	assert.JSONEq(t, `["password"]`, string(body))
	status, body = devAgentCall(t, a, "GET", "/secrets/password", a.Token())
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, `{"user":"dev","password":"rotated"}`, string(devAgentDetails(t, body, "password")))
	assert.Equal(t, `{"user":"dev","password":"rotated"}`, string(mustReadFile(t, filepath.Join(a.MountSource, "password"))))
	status, _ = devAgentCall(t, a, "POST", "/secrets/password?received=true", a.Token())
	assert.Equal(t, http.StatusCreated, status)
	status, _ = devAgentCall(t, a, "GET", "/secrets", a.Token())
	assert.Equal(t, http.StatusNotFound, status)

	// The same content again is no update; an unknown name is refused.
	changed, err = a.UpdateSecret(ctx, "password", []byte(`{"user":"dev","password":"rotated"}`))
	require.NoError(t, err)
	assert.False(t, changed)
	_, err = a.UpdateSecret(ctx, "other", []byte("x"))
	assert.ErrorIs(t, err, edgesecrets.ErrNotFound)

	// Another update, then a restart of the service.
	changed, err = a.UpdateSecret(ctx, "cert.der", []byte{1, 2, 3})
	require.NoError(t, err)
	assert.True(t, changed)
	assert.FileExists(t, filepath.Join(a.StatusDir, "SECRETS_UPDATED"))
	require.NoError(t, a.Store.ServiceRestarted(ctx, a.InstanceID))
	status, _ = devAgentCall(t, a, "GET", "/secrets", a.Token())
	assert.Equal(t, http.StatusNotFound, status)

	// Close wipes everything and stops serving.
	mount := a.MountSource
	require.NoError(t, a.Close())
	assert.NoDirExists(t, mount)
	assert.NoDirExists(t, filepath.Dir(filepath.Dir(filepath.Dir(mount))), "the temporary directory is left")
	_, err = http.Get(a.URL + "/secrets")
	assert.Error(t, err)
	require.NoError(t, a.Close(), "a second Close")
}

func TestDevAgentOptions(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "root")
	a, err := mock.NewDevAgent(ctx, mock.DevAgentOptions{
		SecretFiles: devAgentWriteFiles(t, map[string][]byte{"k": []byte("v")}),
		InstanceID:  "my-service", Token: "tok", Dir: dir,
	})
	require.NoError(t, err)
	assert.Equal(t, "my-service", a.InstanceID)
	assert.Equal(t, "tok", a.Token())
	assert.Equal(t, filepath.Join(dir, "instances", "my-service"), a.MountSource)
	status, body := devAgentCall(t, a, "GET", "/secrets/k", "tok")
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, "v", string(devAgentDetails(t, body, "k")))

	// The same API served elsewhere, from Handler.
	elsewhere := httptest.NewServer(a.Handler)
	defer elsewhere.Close()
	req, err := http.NewRequest("GET", elsewhere.URL+"/secrets/k", nil)
	require.NoError(t, err)
	req.SetBasicAuth("my-service", "tok")
	resp, err := elsewhere.Client().Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, a.Close())
	assert.DirExists(t, dir, "a caller's directory is kept")
	assert.NoDirExists(t, filepath.Join(dir, "instances", "my-service"))
}

func TestDevAgentBadFiles(t *testing.T) {
	ctx := context.Background()
	one := devAgentWriteFiles(t, map[string][]byte{"same": []byte("1")})
	two := devAgentWriteFiles(t, map[string][]byte{"same": []byte("2")})
	tests := []struct {
		name  string
		opts  mock.DevAgentOptions
		kind  error
		wants string
	}{
		{"duplicate names", mock.DevAgentOptions{SecretFiles: []string{one[0], two[0]}}, edgesecrets.ErrInvalid, `two secret files are named "same"`},
		{"missing file", mock.DevAgentOptions{SecretFiles: []string{filepath.Join(t.TempDir(), "nope")}}, os.ErrNotExist, "nope"},
		{"name that is not a file name", mock.DevAgentOptions{SecretFiles: []string{"/"}}, edgesecrets.ErrInvalid, "slash"},
		{"instance id with a colon", mock.DevAgentOptions{SecretFiles: one, InstanceID: "a:b"}, edgesecrets.ErrInvalid, "colon"},
		{"address that cannot be listened on", mock.DevAgentOptions{SecretFiles: one, Addr: "256.0.0.1:0"}, nil, "listen"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, err := filepath.Glob(filepath.Join(os.TempDir(), "edgesecrets-devagent-*"))
			require.NoError(t, err)
			a, err := mock.NewDevAgent(ctx, tt.opts)
			require.Error(t, err)
			assert.Nil(t, a)
			if tt.kind != nil {
				assert.ErrorIs(t, err, tt.kind)
			}
			assert.Contains(t, err.Error(), tt.wants)
			after, err := filepath.Glob(filepath.Join(os.TempDir(), "edgesecrets-devagent-*"))
			require.NoError(t, err)
			assert.Equal(t, len(before), len(after), "a failed start left its temporary directory")
		})
	}
}

func mustReadFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}
