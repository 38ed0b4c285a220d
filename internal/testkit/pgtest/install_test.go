package pgtest

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The cache usually holds the template already: make one afresh, as on a
// new machine.
func TestMakeTemplateCachesAnInitialisedCluster(t *testing.T) {
	inst, err := locate()
	if err != nil {
		fatalOrSkip(t, err)
	}
	cache := t.TempDir()
	dir := filepath.Join(cache, "template")
	tp, err := makeTemplate(t.Context(), inst, dir)
	require.NoError(t, err)

	assert.Equal(t, filepath.Join(dir, "data"), tp.dataDir)
	assert.FileExists(t, filepath.Join(tp.dataDir, "PG_VERSION"))
	assert.FileExists(t, filepath.Join(tp.dataDir, "global", "pg_control"))
	assert.Regexp(t, regexp.MustCompile(`^[0-9a-f]{32}$`), tp.password)
	fi, err := os.Stat(filepath.Join(dir, "password"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the password file is private")

	entries, err := os.ReadDir(cache)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no staging directory left behind")
	assert.Equal(t, "template", entries[0].Name())

	loaded, err := loadTemplate(dir)
	require.NoError(t, err)
	assert.Equal(t, tp.password, loaded.password)
}

func TestMajorVersion(t *testing.T) {
	for out, want := range map[string]int{
		"postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)\n": 15,
		"postgres (PostgreSQL) 17.2\n":                           17,
		"postgres (PostgreSQL) 9.6.24\n":                         9,
	} {
		got, err := majorVersion(out)
		require.NoError(t, err, out)
		assert.Equal(t, want, got, out)
	}
	for _, out := range []string{"", "postgres\n", "postgres (PostgreSQL) devel\n"} {
		_, err := majorVersion(out)
		assert.Error(t, err, "%q", out)
	}
}
