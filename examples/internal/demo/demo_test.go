package demo_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/examples/internal/demo"
)

var instance = identity.Identity{Provider: "demo", Org: "myorg", Node: "node-1", InstanceID: "i-1"}

func TestAttestation(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	doc := demo.Attest("bootstrap-token", instance, now)
	attestor := demo.NewAttestor("bootstrap-token")

	issuedAt, err := attestor(t.Context(), identity.AttestationRequest{Instance: instance, Attestation: doc})
	require.NoError(t, err)
	assert.Equal(t, now, issuedAt, "the Issuer checks freshness against the document's time")

	other := instance
	other.InstanceID = "i-2"
	forged := strings.Replace(string(doc), "1800000000", "1800000600", 1)
	for name, req := range map[string]identity.AttestationRequest{
		"another token":    {Instance: instance, Attestation: demo.Attest("other-token", instance, now)},
		"another instance": {Instance: other, Attestation: doc},
		"time changed":     {Instance: instance, Attestation: identity.Attestation(forged)},
		"not a document":   {Instance: instance, Attestation: "hello"},
		"no mac":           {Instance: instance, Attestation: "demo1.1800000000"},
		"bad time":         {Instance: instance, Attestation: "demo1.x.00"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := attestor(t.Context(), req)
			require.Error(t, err)
			assert.NotContains(t, err.Error(), string(doc)[6:], "errors never quote the document")
		})
	}
}

// The Issuer takes a demo attestation for a registration.
func TestAttestationRegisters(t *testing.T) {
	issuer, err := identity.NewIssuer(identity.IssuerOptions{Attest: demo.NewAttestor("bootstrap-token")})
	require.NoError(t, err)
	keys, err := agreement.GenerateKeys(agreement.SuiteX25519)
	require.NoError(t, err)
	agent, err := identity.NewAgent(identity.AgentOptions{Instance: instance, SigningKey: keys.Signer(), EncryptionKey: keys.Public().EncryptionKey(), Issuer: issuer})
	require.NoError(t, err)
	_, err = agent.Register(t.Context(), demo.Attest("wrong-token", instance, time.Now()))
	require.ErrorIs(t, err, identity.ErrForbidden)
	_, err = agent.Register(t.Context(), demo.Attest("bootstrap-token", instance, time.Now().Add(-time.Hour)))
	require.ErrorIs(t, err, identity.ErrForbidden, "a stale document is refused")
	_, err = agent.Register(t.Context(), demo.Attest("bootstrap-token", instance, time.Now()))
	require.NoError(t, err)
}

func TestEnv(t *testing.T) {
	path := filepath.Join(t.TempDir(), "env", "web.json")
	env := demo.Env{API: "http://127.0.0.1:1", Instance: "web", Token: "tok-SECRET", Mount: "/m/web"}
	require.NoError(t, demo.WriteEnv(path, env))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	got, err := demo.ReadEnv(path)
	require.NoError(t, err)
	assert.Equal(t, env, got)

	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("env", "env", env, "nested", struct{ Env demo.Env }{env})
	marshalled, err := json.Marshal(env)
	require.NoError(t, err)
	for _, printed := range []string{fmt.Sprint(env), fmt.Sprintf("%+v", env), fmt.Sprintf("%#v", env), logged.String(), string(marshalled)} {
		assert.NotContains(t, printed, "tok-SECRET")
		assert.Contains(t, printed, "web")
	}

	require.Error(t, demo.WriteEnv(path, demo.Env{API: "x"}), "an incomplete env is not written")
	got, err = demo.ReadEnv(path)
	require.NoError(t, err)
	assert.Equal(t, env, got, "the old file is kept")
}

func TestDecodeEnvErrors(t *testing.T) {
	for _, in := range []string{
		``, `[]`, `{}`,
		`{"api":"a","instance":"i","token":"t"}`,
		`{"api":"a","instance":"i","token":"t","mount":"m","extra":"SECRET-x"}`,
		`{"api":"a","instance":"i","token":"t","mount":"m"} {}`,
		`{"api":"a","instance":"i","token":SECRET-y,"mount":"m"}`,
	} {
		_, err := demo.DecodeEnv([]byte(in))
		require.Error(t, err, "%s", in)
		assert.NotContains(t, err.Error(), "SECRET-", "errors never quote the file")
	}
}

func FuzzDecodeEnv(f *testing.F) {
	f.Add([]byte(`{"api":"http://127.0.0.1:1","instance":"web","token":"t","mount":"/m"}`))
	f.Add([]byte(`{"api":"","instance":"web","token":"t","mount":"/m"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		env, err := demo.DecodeEnv(b)
		if err != nil {
			return
		}
		require.NoError(t, env.Validate())
		again, err := demo.EncodeEnv(env)
		require.NoError(t, err)
		env2, err := demo.DecodeEnv(again)
		require.NoError(t, err)
		require.Equal(t, env, env2)
	})
}

func TestTokens(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "admin-token")
	tok, err := demo.ReadOrCreateToken(path)
	require.NoError(t, err)
	assert.NotEmpty(t, tok)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	again, err := demo.ReadOrCreateToken(path)
	require.NoError(t, err)
	assert.Equal(t, tok, again, "an existing token is kept")

	for _, content := range []string{"", "  \n", "two words\n"} {
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		_, err := demo.ReadToken(path)
		assert.Error(t, err, "%q", content)
	}
	require.NoError(t, os.WriteFile(path, []byte(" spaced \n"), 0o600))
	tok, err = demo.ReadToken(path)
	require.NoError(t, err)
	assert.Equal(t, "spaced", tok)
}

func TestLoadOrCreateKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.pem")
	keys, created, err := demo.LoadOrCreateKeys(path)
	require.NoError(t, err)
	assert.True(t, created)
	assert.Equal(t, agreement.SuiteMLKEM768X25519, keys.Public().Suite())
	again, created, err := demo.LoadOrCreateKeys(path)
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, keys.Public().String(), again.Public().String())

	require.NoError(t, os.Chmod(path, 0o644))
	_, _, err = demo.LoadOrCreateKeys(path)
	assert.ErrorIs(t, err, edgesecrets.ErrInvalid, "a readable key file is refused, not replaced")
}

func TestListen(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:0", "example.com:0", "nonsense"} {
		_, err := demo.Listen(addr, "", http.NotFoundHandler(), log)
		assert.Error(t, err, addr)
	}
	addrFile := filepath.Join(t.TempDir(), "url")
	srv, err := demo.Listen("127.0.0.1:0", addrFile, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }), log)
	require.NoError(t, err)
	b, err := os.ReadFile(addrFile)
	require.NoError(t, err)
	assert.Equal(t, srv.URL+"\n", string(b))
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusTeapot, resp.StatusCode)
	require.NoError(t, srv.Shutdown())
	_, err = http.Get(srv.URL)
	assert.Error(t, err, "stopped")
}

func TestNewLogger(t *testing.T) {
	var buf bytes.Buffer
	log, err := demo.NewLogger(&buf, "warn")
	require.NoError(t, err)
	log.Info("hidden")
	log.Warn("shown")
	assert.NotContains(t, buf.String(), "hidden")
	assert.Contains(t, buf.String(), "shown")
	_, err = demo.NewLogger(&buf, "loud")
	assert.Error(t, err)
}

// The hub CA is made once, kept in two 0600 files, and the same CA is
// loaded from them after a restart; one file without the other is refused.
func TestLoadOrCreateCA(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
	ca, created, err := demo.LoadOrCreateCA(certPath, keyPath)
	require.NoError(t, err)
	assert.True(t, created)
	for _, p := range []string{certPath, keyPath} {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), p)
	}
	again, created, err := demo.LoadOrCreateCA(certPath, keyPath)
	require.NoError(t, err)
	assert.False(t, created)
	assert.True(t, ca.Chain()[0].Equal(again.Chain()[0]), "the same CA after a restart")

	require.NoError(t, os.Remove(keyPath))
	_, _, err = demo.LoadOrCreateCA(certPath, keyPath)
	assert.ErrorContains(t, err, "must both exist")
}

func TestJoinOnReturn(t *testing.T) {
	runErr, closeErr := errors.New("run failed"), errors.New("close failed")
	tests := []struct {
		name     string
		run, fn  error
		want     []error
		wantText string
	}{
		{name: "both succeed"},
		{name: "the run fails", run: runErr, want: []error{runErr}, wantText: "run failed"},
		{name: "the close fails", fn: closeErr, want: []error{closeErr}, wantText: "closing the store: close failed"},
		{name: "both fail", run: runErr, fn: closeErr, want: []error{runErr, closeErr}, wantText: "run failed\nclosing the store: close failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			called := false
			err := func() (err error) {
				defer demo.JoinOnReturn(&err, "closing the store", func() error { called = true; return tt.fn })
				return tt.run
			}()
			assert.True(t, called)
			if tt.want == nil {
				require.NoError(t, err)
				return
			}
			for _, want := range tt.want {
				require.ErrorIs(t, err, want)
			}
			assert.Equal(t, tt.wantText, err.Error())
		})
	}
}
