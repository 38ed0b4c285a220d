package patchtest

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/open-horizon/anax/agreementbot/secrets"
	"github.com/open-horizon/anax/agreementbot/secrets/vault"
	"github.com/open-horizon/anax/config"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const fakeName = "patchtest-fake"

// fakePlugin is a secrets plugin that only records Initialize; the embedded
// nil interface makes any other call panic, which no test here makes.
type fakePlugin struct {
	secrets.AgbotSecrets
	initErr error
	inited  *config.HorizonConfig
}

func (f *fakePlugin) Initialize(cfg *config.HorizonConfig) error {
	f.inited = cfg
	return f.initErr
}

// registerFake registers a fresh fake under fakeName for the test's duration.
func registerFake(t *testing.T, initErr error) *fakePlugin {
	t.Helper()
	f := &fakePlugin{initErr: initErr}
	secrets.Register(fakeName, f)
	t.Cleanup(func() { delete(secrets.SecretsProviders, fakeName) })
	return f
}

func agbotConfig(provider string, withVault bool) *config.HorizonConfig {
	cfg := &config.HorizonConfig{}
	cfg.AgreementBot.SecretsProvider = provider
	if withVault {
		cfg.AgreementBot.Vault.VaultURL = "http://127.0.0.1:1"
	}
	return cfg
}

func TestInitSecretsPicksTheConfiguredPlugin(t *testing.T) {
	errInit := errors.New("fake initialize failed")
	tests := []struct {
		name      string
		provider  string
		withVault bool
		initErr   error
		want      string // "vault", "fake", or "" for no plugin
		wantErr   []string
		wantIs    error
	}{
		{name: "empty name is vault", provider: "", withVault: true, want: "vault"},
		{name: "vault by name", provider: "vault", withVault: true, want: "vault"},
		{name: "vault unconfigured", provider: "", wantErr: []string{"Vault is not configured correctly"}},
		{name: "vault by name unconfigured", provider: "vault", wantErr: []string{"Vault is not configured correctly"}},
		{name: "registered plugin without vault config", provider: fakeName, want: "fake"},
		{name: "registered plugin beside vault config", provider: fakeName, withVault: true, want: "fake"},
		{name: "plugin's initialize error", provider: fakeName, initErr: errInit, want: "fake", wantIs: errInit},
		{name: "unknown name", provider: "no-such-plugin", withVault: true, wantErr: []string{`"no-such-plugin"`, fakeName, "vault"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := registerFake(t, tt.initErr)
			cfg := agbotConfig(tt.provider, tt.withVault)
			got, err := secrets.InitSecrets(cfg)
			switch {
			case tt.wantIs != nil:
				require.ErrorIs(t, err, tt.wantIs)
			case tt.wantErr != nil:
				require.Error(t, err)
				for _, s := range tt.wantErr {
					assert.Contains(t, err.Error(), s)
				}
			default:
				require.NoError(t, err)
			}
			switch tt.want {
			case "vault":
				assert.IsType(t, &vault.AgbotVaultSecrets{}, got)
				assert.Nil(t, fake.inited, "the fake was initialized")
			case "fake":
				assert.Same(t, fake, got)
				assert.Same(t, cfg, fake.inited, "the fake was not initialized with the config")
			default:
				assert.Nil(t, got)
				assert.Nil(t, fake.inited, "the fake was initialized")
			}
		})
	}
}

func TestConfigFileNamesThePlugin(t *testing.T) {
	fake := registerFake(t, nil)
	file := filepath.Join(t.TempDir(), "anax.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"AgreementBot": {
		"SecretsProvider": "`+fakeName+`",
		"SecretsProviderConfig": "/etc/horizon/edgesecrets.json"
	}}`), 0o600))
	cfg, err := config.Read(file)
	require.NoError(t, err)
	assert.Equal(t, fakeName, cfg.AgreementBot.SecretsProvider)
	assert.Equal(t, "/etc/horizon/edgesecrets.json", cfg.AgreementBot.SecretsProviderConfig)
	got, err := secrets.InitSecrets(cfg)
	require.NoError(t, err)
	assert.Same(t, fake, got)
}

func TestUnsetPluginFieldsStayOutOfTheJSON(t *testing.T) {
	out, err := json.Marshal(config.AGConfig{})
	require.NoError(t, err)
	assert.NotContains(t, string(out), "SecretsProvider")

	out, err = json.Marshal(config.AGConfig{SecretsProvider: "x", SecretsProviderConfig: "/y"})
	require.NoError(t, err)
	assert.Contains(t, string(out), `"SecretsProvider":"x"`)
	assert.Contains(t, string(out), `"SecretsProviderConfig":"/y"`)
}
