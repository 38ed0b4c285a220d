package demo

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The ESS endpoint answers over HTTPS on the socket and the port, to a
// client that trusts its certificate, and to curl as helloSecretWorld
// calls it; a client that does not trust it is refused.
func TestListenESS(t *testing.T) {
	dir := t.TempDir()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.URL.Path) })
	s, err := ListenESS(ESSOptions{Addr: "127.0.0.1:0", Socket: filepath.Join(dir, ESSSocketFile), Dir: dir, Handler: h})
	require.NoError(t, err)
	fi, err := os.Stat(filepath.Join(dir, ESSKeyFile))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	for _, c := range []struct{ name, url, socket string }{
		{"socket", "https://localhost/api/v1/secrets", s.Socket},
		{"port", s.URL + "/api/v1/secrets", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			client, err := ESSClient(s.CertFile, c.socket)
			require.NoError(t, err)
			resp, err := client.Get(c.url)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, "/api/v1/secrets", string(body))
			assert.Equal(t, 1, resp.ProtoMajor)
			assert.NotNil(t, resp.TLS)
		})
	}
	_, err = http.Get(s.URL)
	assert.Error(t, err, "an untrusted certificate")

	if curl, err := exec.LookPath("curl"); err == nil {
		out, err := exec.Command(curl, "--silent", "--show-error", "--cacert", s.CertFile, "--unix-socket", s.Socket, "https://localhost/api/v1/secrets").CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Equal(t, "/api/v1/secrets", string(out))
	}

	require.NoError(t, s.Shutdown())
	_, err = os.Stat(s.Socket)
	assert.ErrorIs(t, err, os.ErrNotExist)
	_, err = ListenESS(ESSOptions{Dir: dir, Handler: h})
	assert.Error(t, err)
	_, err = ListenESS(ESSOptions{Addr: "0.0.0.0:0", Dir: dir, Handler: h})
	assert.ErrorContains(t, err, "loopback")
}
