package anaxhub

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgesecrets/edgesecrets/internal/testkit"
)

// EnvHzn names the environment variable holding the hzn binary's path.
const EnvHzn = "EDGESECRETS_HZN_BIN"

// EnvAnaxSrc names the environment variable holding the patched anax
// source tree scripts/devanax.sh makes.
const EnvAnaxSrc = "EDGESECRETS_ANAX_SRC"

// HowToGet tells a developer how to make the anax tests run.
const HowToGet = "run `bash scripts/test.sh`, or `eval \"$(bash scripts/devanax.sh)\"` (it builds hzn from anax's cli and prints " +
	EnvHzn + ", " + EnvAnaxSrc + " and EDGESECRETS_ANAX_WORK; export them) then go test with GOWORK=$EDGESECRETS_ANAX_WORK"

// runTimeout bounds one hzn command. hzn retries a 503 three times a
// second apart; nothing else it does here should take long.
const runTimeout = 60 * time.Second

// scriptTimeout bounds one e2e script: some fifty hzn commands.
const scriptTimeout = 5 * time.Minute

// HznBinary returns the hzn binary's path. Without one the test fails
// under CI=true and skips elsewhere, saying how to get it.
func HznBinary(t testing.TB) string {
	t.Helper()
	return executable(t, EnvHzn, "hzn binary")
}

// AnaxSource returns the patched anax source tree (it holds anax's e2e
// scripts under test/gov). Without one the test fails under CI=true and
// skips elsewhere.
func AnaxSource(t testing.TB) string {
	t.Helper()
	dir := os.Getenv(EnvAnaxSrc)
	if dir == "" {
		testkit.Unavailable(t, fmt.Sprintf("anaxhub: %s is not set; %s", EnvAnaxSrc, HowToGet))
	}
	if fi, err := os.Stat(filepath.Join(dir, "test", "gov")); err != nil || !fi.IsDir() {
		testkit.Unavailable(t, fmt.Sprintf("anaxhub: %s=%s holds no test/gov; %s", EnvAnaxSrc, dir, HowToGet))
	}
	return dir
}

// Tool returns the path of a program the e2e scripts need (curl, jq,
// bash) found on PATH, with the same CI rule.
func Tool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		testkit.Unavailable(t, fmt.Sprintf("anaxhub: %s is not on PATH; install it (bash scripts/debpkg.sh installs curl and jq)", name))
	}
	return p
}

func executable(t testing.TB, env, what string) string {
	t.Helper()
	bin := os.Getenv(env)
	if bin == "" {
		testkit.Unavailable(t, fmt.Sprintf("anaxhub: no %s: %s is not set; %s", what, env, HowToGet))
	}
	fi, err := os.Stat(bin)
	if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		testkit.Unavailable(t, fmt.Sprintf("anaxhub: no %s: %s=%s is not an executable file; %s", what, env, bin, HowToGet))
	}
	return bin
}

// Hzn runs the hzn CLI in a clean environment: a HOME of its own (no
// ~/.hzn config), no proxy, no HZN_* variable but those given.
type Hzn struct {
	// Bin is the hzn binary.
	Bin string
	// Env is added to every command's environment ("K=V").
	Env  []string
	home string
}

// NewHzn returns a runner for the hzn at HznBinary with env added to every
// command's environment.
func NewHzn(t testing.TB, env ...string) *Hzn {
	t.Helper()
	return &Hzn{Bin: HznBinary(t), Env: env, home: t.TempDir()}
}

// Result is what one command did.
type Result struct {
	// Code is the exit status (-1 when it did not exit normally).
	Code   int
	Stdout string
	Stderr string
}

// Script runs a shell script (interpreter, then the script's path) with
// hzn first on PATH, the base environment, the runner's Env and env. Only a
// failure to start it, or a timeout, is an error.
func (h *Hzn) Script(ctx context.Context, env []string, interpreter, script string) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, scriptTimeout)
	defer cancel()
	bin := filepath.Join(h.home, "bin")
	if err := os.MkdirAll(bin, 0o700); err != nil {
		return Result{}, err
	}
	if err := os.Symlink(h.Bin, filepath.Join(bin, "hzn")); err != nil && !errors.Is(err, os.ErrExist) {
		return Result{}, err
	}
	cmd := exec.CommandContext(ctx, interpreter, script)
	cmd.Env = append(append(h.BaseEnv(), h.Env...), env...)
	for i, kv := range cmd.Env {
		if strings.HasPrefix(kv, "PATH=") {
			cmd.Env[i] = "PATH=" + bin + string(os.PathListSeparator) + strings.TrimPrefix(kv, "PATH=")
		}
	}
	return h.exec(ctx, cmd, "", script)
}

// Run runs hzn with args, extra environment env ("K=V") and stdin, and
// returns what it did. Only a failure to start it, or a timeout, is an error.
func (h *Hzn) Run(ctx context.Context, env []string, stdin string, args ...string) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.Bin, args...)
	cmd.Env = append(append(h.BaseEnv(), h.Env...), env...)
	return h.exec(ctx, cmd, stdin, "hzn "+strings.Join(args, " "))
}

func (h *Hzn) exec(ctx context.Context, cmd *exec.Cmd, stdin, what string) (Result, error) {
	cmd.Dir = h.home
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := Result{Code: -1, Stdout: stdout.String(), Stderr: stderr.String()}
	if cmd.ProcessState != nil {
		res.Code = cmd.ProcessState.ExitCode()
	}
	if ctx.Err() != nil {
		return res, fmt.Errorf("%s: %w", what, ctx.Err())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return res, fmt.Errorf("%s: %w", what, err)
	}
	return res, nil
}

// BaseEnv is the environment every command starts from: PATH, a HOME of
// the runner's own, a fixed locale (hzn's messages are localized).
func (h *Hzn) BaseEnv() []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + h.home,
		"LANG=C",
		"LC_ALL=C",
		"HZN_LANG=en",
	}
}
