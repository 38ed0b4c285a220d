//go:build unix

package agentapi

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkReadRegular compares the read path of GET /secrets/{name}
// through openat2 (RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS), through the
// per-element walk older kernels get, and a plain openat with O_NOFOLLOW
// on the last element only (what the store did before issue 18), side by
// side:
//
//	go test -bench ReadRegular -benchmem -run '^$' ./agentapi
func BenchmarkReadRegular(b *testing.B) {
	dir := b.TempDir()
	require := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	require(os.MkdirAll(filepath.Join(dir, "instances", "web-1"), 0o700))
	require(os.WriteFile(filepath.Join(dir, "instances", "web-1", "password"), []byte(`{"password":"s3cr3t","user":"app"}`), 0o400))
	t, err := openTree(dir)
	require(err)
	defer t.Close()
	const rel = "instances/web-1/password"
	for _, walk := range []bool{false, true} {
		name := "openat2"
		if walk {
			name = "walk"
		}
		b.Run(name, func(b *testing.B) {
			t.noOpenat2.Store(walk)
			for b.Loop() {
				if _, err := t.readRegular(rel); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("openat-last-element-only", func(b *testing.B) {
		buf := make([]byte, 64)
		for b.Loop() {
			fd, err := unix.Openat(t.fd, rel, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
			if err != nil {
				b.Fatal(err)
			}
			var st unix.Stat_t
			_ = unix.Fstat(fd, &st)
			_, _ = unix.Read(fd, buf[:st.Size])
			unix.Close(fd)
		}
	})
}
