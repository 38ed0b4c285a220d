package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/examples/internal/demo"
	"github.com/edgesecrets/edgesecrets/internal/testkit/logtest"
	"github.com/edgesecrets/edgesecrets/mock"
)

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:6])
}

func newService(t *testing.T, env demo.Env) (*service, *bytes.Buffer, *logtest.Buffer) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "web.json")
	if env != (demo.Env{}) {
		require.NoError(t, demo.WriteEnv(path, env))
	}
	log, logs := logtest.NewLogger()
	var out bytes.Buffer
	return &service{envPath: path, out: &out, log: log, http: &http.Client{Timeout: 10 * time.Second}, seen: map[string]string{}}, &out, logs
}

// Against the real /secrets API (mock.DevAgent): the service reports its
// mount, fetches and acknowledges an update, and sees its files go.
func TestServiceAgainstTheAPI(t *testing.T) {
	ctx := t.Context()
	file := filepath.Join(t.TempDir(), "api_key")
	require.NoError(t, os.WriteFile(file, []byte("VALUE-1"), 0o600))
	agent, err := mock.NewDevAgent(ctx, mock.DevAgentOptions{SecretFiles: []string{file}, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { agent.Close() })
	s, out, logs := newService(t, demo.Env{API: agent.URL, Instance: agent.InstanceID, Token: agent.Token(), Mount: agent.MountSource})
	tick := func() { s.once(ctx) }

	tick()
	assert.Equal(t, "mount api_key "+hash("VALUE-1")+"\n", out.String())
	out.Reset()
	tick()
	assert.Empty(t, out.String(), "nothing new")

	_, err = agent.UpdateSecret(ctx, "api_key", []byte("VALUE-2"))
	require.NoError(t, err)
	tick()
	assert.Equal(t, "mount api_key "+hash("VALUE-2")+"\nupdate api_key "+hash("VALUE-2")+"\nack api_key\n", out.String())
	info, _ := agent.Store.Instance(agent.InstanceID)
	assert.Empty(t, info.Updated, "acknowledged")
	out.Reset()

	require.NoError(t, agent.Close()) // wipes the instance
	require.NoError(t, os.Remove(s.envPath))
	tick()
	assert.Equal(t, "removed api_key\n", out.String())
	assert.NotContains(t, logs.String(), "VALUE-")
	assert.NotContains(t, logs.String(), agent.Token())
}

func TestServiceRefusedOrConfused(t *testing.T) {
	ctx := t.Context()
	for name, handler := range map[string]http.HandlerFunc{
		"token refused": func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusUnauthorized) },
		"not a list":    func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{"VALUE-x": 1}`)) },
		"answer for another secret": func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/secrets" {
				w.Write([]byte(`["api_key"]`))
				return
			}
			w.Write([]byte(`{"other":{"details":"VkFMVUUteA=="}}`))
		},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(handler)
			t.Cleanup(srv.Close)
			s, out, logs := newService(t, demo.Env{API: srv.URL, Instance: "web", Token: "t", Mount: t.TempDir()})
			s.readEnv()
			require.True(t, s.hasEnv)
			s.checkUpdates(ctx)
			assert.Empty(t, out.String(), "nothing fetched or acknowledged")
			assert.Contains(t, logs.String(), `"level":"WARN"`)
			assert.NotContains(t, logs.String(), "VALUE-x")
		})
	}
}

// Against the agent's Open Horizon profile, served as the example agent
// serves it (HTTPS on a unix socket, demo.ListenESS): the service reads the
// {"key","value"} answer's value and acknowledges.
func TestServiceAgainstTheOpenHorizonAPI(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	store, err := agentapi.Open(ctx, agentapi.Options{Root: filepath.Join(dir, "secrets")})
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	ref := agreement.ServiceRef{Org: "myorg", URL: "ibm.hello-secret", Version: "1.0.0", Arch: "amd64"}
	hwWho := func(v string) map[string]agreement.SecretDetails {
		return map[string]agreement.SecretDetails{"hw_who": {Data: edgesecrets.Data{"key": []byte("name"), "value": []byte(v)}}}
	}
	_, err = store.ApplyProposal(ctx, agreement.Proposal{AgreementID: "ag-1", Services: []agreement.ServiceSecrets{{Service: ref, Secrets: hwWho("World")}}},
		agentapi.Instances{ref: {ID: "hello"}})
	require.NoError(t, err)
	var tokens agentapi.TokenTable
	require.NoError(t, tokens.Set("hello", "t0ken"))
	h, err := agentapi.NewHandler(store, agentapi.HandlerOptions{OpenHorizon: true, Authenticate: tokens.Authenticate})
	require.NoError(t, err)
	ess, err := demo.ListenESS(demo.ESSOptions{Socket: filepath.Join(dir, demo.ESSSocketFile), Dir: dir, Handler: h})
	require.NoError(t, err)
	t.Cleanup(func() { ess.Shutdown() })
	info, ok := store.Instance("hello")
	require.True(t, ok)
	mount := info.MountSource

	s, out, logs := newService(t, demo.Env{API: "https://unused", Instance: "hello", Token: "t0ken", Mount: mount})
	s.openHorizon = true
	s.base = "https://localhost"
	s.http, err = demo.ESSClient(ess.CertFile, ess.Socket)
	require.NoError(t, err)
	tick := func() { s.once(ctx) }
	tick()
	assert.Equal(t, "mount hw_who "+hash(`{"key":"name","value":"World"}`)+"\n", out.String())
	out.Reset()

	payload, err := json.Marshal(agreement.SecretsUpdate{Services: []agreement.ServiceSecrets{{Service: ref, Secrets: hwWho("Everyone")}}})
	require.NoError(t, err)
	_, err = store.ApplyUpdate(ctx, agreement.Update{AgreementID: "ag-1", Kind: agreement.UpdateKindSecrets, Payload: payload})
	require.NoError(t, err)
	tick()
	assert.Equal(t, "mount hw_who "+hash(`{"key":"name","value":"Everyone"}`)+"\nupdate hw_who "+hash("Everyone")+"\nack hw_who\n", out.String())
	info, _ = store.Instance("hello")
	assert.Empty(t, info.Updated, "acknowledged")

	// A refused token is 403 in this profile: the service re-reads its environment.
	require.NoError(t, tokens.Set("hello", "new-token"))
	_, err = store.ApplyUpdate(ctx, agreement.Update{AgreementID: "ag-1", Kind: agreement.UpdateKindSecrets,
		Payload: mustJSON(t, agreement.SecretsUpdate{Services: []agreement.ServiceSecrets{{Service: ref, Secrets: hwWho("Again")}}})})
	require.NoError(t, err)
	out.Reset()
	tick()
	assert.Equal(t, "mount hw_who "+hash(`{"key":"name","value":"Again"}`)+"\n", out.String())
	assert.Contains(t, logs.String(), "refused the instance's token")
	assert.NotContains(t, logs.String(), "Everyone")
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

func TestServiceWaitsForItsEnvironment(t *testing.T) {
	s, out, _ := newService(t, demo.Env{})
	s.readEnv()
	s.scanMount()
	assert.False(t, s.hasEnv)
	assert.Empty(t, out.String())
}

func FuzzDecodeKeyValue(f *testing.F) {
	f.Add([]byte(`{"key":"name","value":"World"}`))
	f.Add([]byte(`{"key":"name"}`))
	f.Add([]byte(`{"key":"","value":"v","x":1}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		value, err := decodeKeyValue(body)
		if err != nil {
			if len(body) >= 16 {
				assert.NotContains(t, err.Error(), string(body), "errors never quote the answer")
			}
			return
		}
		assert.LessOrEqual(t, len(value), maxSecretBody)
	})
}

func FuzzDecodeSecret(f *testing.F) {
	f.Add([]byte(`{"api_key":{"details":"VkFMVUU="}}`), "api_key")
	f.Add([]byte(`{"api_key":{"details":"VkFMVUU="},"other":{"details":""}}`), "api_key")
	f.Add([]byte(`{"api_key":{"details":"not base64"}}`), "api_key")
	f.Fuzz(func(t *testing.T, body []byte, name string) {
		content, err := decodeSecret(body, name)
		if err != nil {
			if len(body) >= 16 {
				assert.NotContains(t, err.Error(), string(body), "errors never quote the answer")
			}
			return
		}
		assert.LessOrEqual(t, len(content), maxSecretBody)
	})
}

// failingWriter fails every write, the first with first.
type failingWriter struct {
	first  error
	writes int
}

func (w *failingWriter) Write([]byte) (int, error) {
	w.writes++
	if w.writes == 1 {
		return 0, w.first
	}
	return 0, errors.New("a later failure")
}

// A failed write to stdout does not stop the service's events; the first
// failure is the one reported at exit.
func TestServiceKeepsTheFirstFailedWrite(t *testing.T) {
	s, _, _ := newService(t, demo.Env{})
	first := errors.New("stdout gone")
	w := &failingWriter{first: first}
	s.out = w
	s.printf("update %s %s\n", "api_key", hash("VALUE-1"))
	s.printf("ack %s\n", "api_key")
	assert.Equal(t, 2, w.writes, "every event is still written")
	require.ErrorIs(t, s.outErr, first)
	assert.Equal(t, "writing the events: stdout gone", s.outErr.Error())
}
