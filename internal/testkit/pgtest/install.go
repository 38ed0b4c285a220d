package pgtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// installation is the PostgreSQL found on this machine and the user its
// servers run as.
type installation struct {
	binDir string
	// owner is the user the server processes run as and own their files:
	// nil to run as the current user, which PostgreSQL allows unless it is
	// root.
	owner *account
}

// account is a user the server runs as.
type account struct {
	name     string
	uid, gid int
}

// programs are what pgtest runs from the bin directory.
var programs = []string{"initdb", "postgres", "pg_dump"}

// locate finds the PostgreSQL bin directory (EnvBinDir, else the newest
// /usr/lib/postgresql/*/bin) and, under root, the user to run it as. Its
// errors wrap ErrUnavailable.
func locate() (*installation, error) {
	if runtime.GOOS != "linux" {
		return nil, fmt.Errorf("%w: pgtest runs PostgreSQL servers on Linux only", ErrUnavailable)
	}
	dir := os.Getenv(EnvBinDir)
	if dir == "" {
		dir = newestDebianBinDir()
		if dir == "" {
			return nil, fmt.Errorf("%w: %s is not set and no /usr/lib/postgresql/*/bin holds the server", ErrUnavailable, EnvBinDir)
		}
	}
	for _, p := range programs {
		fi, err := os.Stat(filepath.Join(dir, p))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return nil, fmt.Errorf("%w: no executable %s in %s", ErrUnavailable, p, dir)
		}
	}
	inst := &installation{binDir: dir}
	if os.Geteuid() == 0 {
		name := os.Getenv(EnvUser)
		if name == "" {
			name = DefaultUser
		}
		u, err := user.Lookup(name)
		if err != nil {
			return nil, fmt.Errorf("%w: running as root, and PostgreSQL refuses to: no user %q to run it as (scripts/devpostgres.sh creates it)", ErrUnavailable, name)
		}
		uid, err1 := strconv.Atoi(u.Uid)
		gid, err2 := strconv.Atoi(u.Gid)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("user %q: %w", name, err)
		}
		if uid == 0 {
			return nil, fmt.Errorf("%w: user %q is root, and PostgreSQL refuses to run as root", ErrUnavailable, name)
		}
		inst.owner = &account{name: name, uid: uid, gid: gid}
	}
	return inst, nil
}

// newestDebianBinDir returns the bin directory of the highest PostgreSQL
// major version installed the Debian way, or "".
func newestDebianBinDir() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	best, bestVersion := "", -1
	for _, d := range dirs {
		v, err := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		if err != nil || v <= bestVersion {
			continue
		}
		if fi, err := os.Stat(filepath.Join(d, "postgres")); err == nil && !fi.IsDir() {
			best, bestVersion = d, v
		}
	}
	return best
}

func (inst *installation) program(name string) string { return filepath.Join(inst.binDir, name) }

// command returns a command running a PostgreSQL program as the server's
// user, with no PG* variable from our environment, killed if we die.
func (inst *installation) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, inst.program(name), args...)
	cmd.Env = cleanEnv()
	cmd.SysProcAttr = sysProcAttr(inst.owner)
	return cmd
}

// cleanEnv is the environment without PG* variables, so a developer's own
// PostgreSQL settings (PGDATA, PGPORT, PGHOST...) do not leak into the
// throwaway servers and tools.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			env = append(env, kv)
		}
	}
	return env
}

// chown gives path to the server's user, when there is one.
func (inst *installation) chown(path string) error {
	if inst.owner == nil {
		return nil
	}
	return os.Lchown(path, inst.owner.uid, inst.owner.gid)
}

// mkdirTemp makes a temporary directory the server's user owns.
func (inst *installation) mkdirTemp(pattern string) (string, error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", err
	}
	if err := inst.chown(dir); err != nil {
		return "", errors.Join(fmt.Errorf("giving %s to user %s: %w", dir, inst.owner.name, err), os.RemoveAll(dir))
	}
	return dir, nil
}

// template is an initialised cluster that servers start from a copy of.
type template struct {
	dataDir  string
	password string // of the superuser
	major    int    // PostgreSQL's major version
}

// minMajor is the oldest PostgreSQL pgtest runs: 13 has DROP DATABASE ...
// WITH (FORCE) (Debian 11, bullseye, ships 13).
const minMajor = 13

// majorVersion reads the major version from `postgres --version` output:
// "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)".
func majorVersion(out string) (int, error) {
	fields := strings.Fields(out)
	if len(fields) < 3 {
		return 0, fmt.Errorf("unexpected postgres --version output %q", out)
	}
	major, _, _ := strings.Cut(fields[2], ".")
	v, err := strconv.Atoi(major)
	if err != nil {
		return 0, fmt.Errorf("unexpected postgres --version output %q", out)
	}
	return v, nil
}

// initdbArgs make the template: password authentication for every
// connection, a C locale so results do not depend on the machine, and 1 MiB
// WAL segments instead of 16 so a copy is small.
var initdbArgs = []string{"--username=" + superuser, "--auth=scram-sha-256", "--encoding=UTF8", "--locale=C", "--wal-segsize=1"}

// templateFormat changes when the template's layout or making changes.
const templateFormat = "1"

// templates caches the template of each bin directory for this process.
var templates struct {
	mu sync.Mutex
	m  map[string]*template
}

// templateFor returns the template cluster for inst, from the cache
// directory (shared by test binaries, as devvault.sh shares the Vault
// binary), making it with initdb the first time.
func templateFor(ctx context.Context, inst *installation) (*template, error) {
	templates.mu.Lock()
	defer templates.mu.Unlock()
	if tp := templates.m[inst.binDir]; tp != nil {
		return tp, nil
	}
	version, err := inst.command(ctx, "postgres", "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --version: %w", inst.program("postgres"), err)
	}
	major, err := majorVersion(string(version))
	if err != nil {
		return nil, err
	}
	if major < minMajor {
		return nil, fmt.Errorf("%w: %s is PostgreSQL %d; pgtest needs %d or later", ErrUnavailable, inst.binDir, major, minMajor)
	}
	key := sha256.Sum256([]byte(strings.Join(append([]string{templateFormat, inst.binDir, string(version)}, initdbArgs...), "\x00")))
	cache, err := cacheDir()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(cache, "postgres-template-"+hex.EncodeToString(key[:8]))
	tp, err := loadTemplate(dir)
	if err != nil {
		// Test binaries of several packages start at once: one runs
		// initdb, the others wait for it and load its result.
		unlock, err := lockFile(filepath.Join(cache, "postgres-template.lock"))
		if err != nil {
			return nil, err
		}
		defer unlock()
		if tp, err = loadTemplate(dir); err != nil {
			if tp, err = makeTemplate(ctx, inst, dir); err != nil {
				return nil, err
			}
		}
	}
	tp.major = major
	if templates.m == nil {
		templates.m = map[string]*template{}
	}
	templates.m[inst.binDir] = tp
	return tp, nil
}

// cacheDir is where devvault.sh caches too: EDGESECRETS_CACHE, else
// edgesecrets in the user's cache directory.
func cacheDir() (string, error) {
	dir := os.Getenv("EDGESECRETS_CACHE")
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(base, "edgesecrets")
	}
	return dir, os.MkdirAll(dir, 0o755)
}

func loadTemplate(dir string) (*template, error) {
	pw, err := os.ReadFile(filepath.Join(dir, "password"))
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err != nil {
		return nil, err
	}
	return &template{dataDir: data, password: string(pw)}, nil
}

// makeTemplate runs initdb in a temporary directory the server's user owns
// and moves the result into dir.
func makeTemplate(ctx context.Context, inst *installation, dir string) (tp *template, err error) {
	work, err := inst.mkdirTemp("pgtest-initdb-")
	if err != nil {
		return nil, err
	}
	defer removeTemp(work, &tp, &err)
	password, err := randomHex(16)
	if err != nil {
		return nil, err
	}
	pwfile := filepath.Join(work, "pwfile")
	if err := os.WriteFile(pwfile, []byte(password+"\n"), 0o600); err != nil {
		return nil, err
	}
	if err := inst.chown(pwfile); err != nil {
		return nil, err
	}
	data := filepath.Join(work, "data")
	// --no-sync: the copy into the cache is synced instead.
	args := append([]string{"--pgdata=" + data, "--pwfile=" + pwfile, "--no-sync"}, initdbArgs...)
	if out, err := inst.command(ctx, "initdb", args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}

	// Assemble next to dir, then rename: a reader sees all or nothing.
	staging, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".tmp-")
	if err != nil {
		return nil, err
	}
	// Gone once renamed into place: then removing it does nothing.
	defer removeTemp(staging, &tp, &err)
	if err := copyTree(data, filepath.Join(staging, "data"), nil, true); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(staging, "password"), []byte(password), 0o600); err != nil {
		return nil, err
	}
	if err := os.Chmod(staging, 0o700); err != nil {
		return nil, err
	}
	if err := os.Rename(staging, dir); err != nil {
		return nil, fmt.Errorf("caching the template cluster: %w", err)
	}
	return loadTemplate(dir)
}

// removeTemp removes the temporary directory dir when makeTemplate
// returns; a failure to remove it fails the call.
func removeTemp(dir string, tp **template, err *error) {
	if rerr := os.RemoveAll(dir); rerr != nil {
		*tp, *err = nil, errors.Join(*err, fmt.Errorf("removing %s: %w", dir, rerr))
	}
}

// copyTree copies the directory src to dst (which must not exist) with the
// same permissions, owned by owner when set, syncing every file when
// durable. A data directory holds only directories and regular files.
func copyTree(src, dst string, owner *account, durable bool) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := os.Mkdir(target, info.Mode().Perm()); err != nil {
				return err
			}
		case d.Type().IsRegular():
			if err := copyFile(path, target, info.Mode().Perm(), durable); err != nil {
				return err
			}
		default:
			return fmt.Errorf("copying %s: not a regular file or directory", path)
		}
		// Mkdir and Create apply the umask: set the source's mode exactly.
		if err := os.Chmod(target, info.Mode().Perm()); err != nil {
			return err
		}
		if owner != nil {
			return os.Lchown(target, owner.uid, owner.gid)
		}
		return nil
	})
}

func copyFile(src, dst string, perm fs.FileMode, durable bool) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }() // read-only
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	// io.Copy between files uses copy_file_range on Linux: the kernel
	// copies, or shares the blocks where the file system can.
	_, err = io.Copy(out, in)
	if err == nil && durable {
		err = out.Sync()
	}
	return errors.Join(err, out.Close())
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
