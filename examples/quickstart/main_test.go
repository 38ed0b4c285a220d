package main

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/secretstore"
)

func TestQuickstartRuns(t *testing.T) {
	var out bytes.Buffer
	q, err := newQuickstart("", &out)
	require.NoError(t, err)
	canary := "canary-" + rand.Text()
	q.secrets[0].Data["password"] = []byte(canary)

	require.NoError(t, q.run(t.Context()))
	got := out.String()
	for _, want := range []string{
		`opened a "memory" store, scope "myorg"`,
		"wrote db/password (changed: true)",
		"wrote db/password again, same content (changed: false, so no backend write)",
		"Data:map[password:[redacted] username:[redacted]]",
		fmt.Sprintf("  password: %d bytes", len(canary)),
		"secrets in the store: api/token, db/password",
		"  put    3 calls, 0 errors",
		"  get    2 calls, 1 errors",
		"last successful store interaction: ",
	} {
		assert.Contains(t, got, want)
	}
	assert.NotContains(t, got, canary, "no value is printed")
	for _, s := range q.secrets {
		for k, v := range s.Data {
			if len(v) > 3 {
				assert.NotContains(t, got, string(v), "value of %s/%s", s.Name, k)
			}
		}
	}
}

func TestQuickstartConfigErrors(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name    string
		config  string // written to a file; "" means no file
		wantErr string
		invalid bool
	}{
		{"missing file", "", "reading the store config", false},
		{"unregistered type", `{"type":"vault"}`, `type "vault" is not registered`, true},
		{"several mistakes", `{"type":"memory","defaultScope":"a//b","memory":{"x":1}}`, "2 problems", true},
		{"not JSON", `type=memory`, "config is not valid JSON", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, "missing.json")
			if c.config != "" {
				path = filepath.Join(dir, c.name+".json")
				require.NoError(t, os.WriteFile(path, []byte(c.config), 0o600))
			}
			var out bytes.Buffer
			q, err := newQuickstart(path, &out)
			if err == nil {
				err = q.run(t.Context())
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.wantErr)
			assert.Equal(t, c.invalid, secretstore.KindOf(err) == secretstore.ErrInvalid)
			assert.Empty(t, out.String(), "nothing is done with a bad config")
		})
	}
}

func TestQuickstartConfigFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"type":"memory","defaultScope":"other"}`), 0o600))
	var out bytes.Buffer
	q, err := newQuickstart(path, &out)
	require.NoError(t, err)
	require.NoError(t, q.run(t.Context()))
	assert.Contains(t, out.String(), `opened a "memory" store, scope "other"`)
}
