package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agbot"
	"github.com/edgesecrets/edgesecrets/agreement"
	smmock "github.com/edgesecrets/edgesecrets/internal/testkit/awsmock"
	"github.com/edgesecrets/edgesecrets/internal/testkit/vaulttest"
	"github.com/edgesecrets/edgesecrets/relay"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// theAgreement is the id of the node's agreement, as the agbot derives it.
var theAgreement = agbot.AgreementID(relay.Node{Org: org, Node: nodeName})

// narratedSteps are lines of the narrated log, in the order they must
// appear: one per step of the flow.
var narratedSteps = []string{
	`hub       opened a "memory" store (scope "openhorizon")`,
	"admin     wrote myorg/db/web-login (keys password, username)",
	"admin     wrote myorg/user/alice/api-token (keys token)",
	"deployer  policy for myorg/com.example.web@1.0.0[amd64]#web is valid: db -> db/web-login, api_token -> user/alice/api-token",
	"deployer  a broken policy is refused, with every problem in one report:",
	"error secret_unbound: Service myorg/com.example.web_1.0.0_amd64 declares secret \"api_token\"",
	"error vault_secret_missing: Vault secret \"db/web-logn\"",
	"agent     storage root ",
	"registered as quickstart-provider/myorg/node-1/agent-1: certificate serial ",
	"agbot     verified the certificate myorg/node-1's agent published; deploys the policy to it as " + theAgreement,
	"exchange  carries the sealed proposal of " + theAgreement + " to the agent: ",
	"agent     opened the proposal of " + theAgreement + ": wrote api_token, db for instance web",
	"agbot     the agent accepted " + theAgreement + "; it holds api_token from myorg/user/alice/api-token, db from myorg/db/web-login",
	"exchange  flips one bit of the proposal's ciphertext; the agent refuses it: agentapi: receive: agreement: open: bad signature",
	"exchange  delivers the same proposal again; the agent applies it again, which changes nothing",
	"service   read /open-horizon-secrets/db: JSON with keys password, username, as the admin wrote it",
	"service   read /open-horizon-secrets/api_token: ",
	"service   GET /secrets -> 404: nothing updated since it started",
	"service   GET /secrets/db with a wrong token -> 401",
	"admin     rotated the password of myorg/db/web-login",
	"exchange  carries the sealed update (or cancellation) of " + theAgreement + " to the agent: ",
	"agent     opened the update of " + theAgreement + ": rewrote db for instance web",
	"agbot     engine: its watcher saw new content of myorg/db/web-login; " + theAgreement + " is in sync again: the agent acknowledged it as db",
	"exchange  replays the proposal after the update; the agent refuses it: ",
	"replayed or out-of-order sequence",
	"service   GET /secrets -> 200 [db]",
	"service   GET /secrets/db -> 200: JSON with keys password, username, the rotated value",
	"service   POST /secrets/db?received=true -> 201",
	"service   GET /secrets -> 404: nothing left to fetch",
	"admin     deleted myorg/db/web-login",
	"agent     " + theAgreement + " cancelled: removed instance web (files overwritten with random bytes, synced, deleted)",
	"agbot     engine: the agent acknowledged the cancellation; " + theAgreement + " is forgotten",
	"service   its mount directory is gone and GET /secrets -> 401",
	"done in ",
}

// narratedAnywhere are lines of the narrated log whose place among the
// others depends on timing: the engine's cancel hook runs on its own
// goroutine, before or after the cancellation is sent.
var narratedAnywhere = []string{
	"agbot     engine cancel hook: myorg/db/web-login is missing, so " + theAgreement + " is cancelled; the engine tells the agent",
}

// assertNarration checks a whole flow's narration: want in order, and
// narratedAnywhere.
func assertNarration(t *testing.T, out string, want []string) {
	t.Helper()
	assertInOrder(t, out, want)
	for _, w := range narratedAnywhere {
		assert.Contains(t, out, w)
	}
}

// assertInOrder checks that each of want occurs in out, after the previous.
func assertInOrder(t *testing.T, out string, want []string) {
	t.Helper()
	rest := out
	for _, w := range want {
		i := strings.Index(rest, w)
		if !assert.GreaterOrEqual(t, i, 0, "narration lacks, in this place, %q\n--- narration:\n%s", w, out) {
			return
		}
		rest = rest[i+len(w):]
	}
}

// TestQuickstartProgram builds the program and runs it as a user does.
func TestQuickstartProgram(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "quickstart")
	build := exec.Command("go", "build", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	exe := func(t *testing.T, args ...string) (stdout, stderr string, code int) {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
		err := cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return o.String(), e.String(), exit.ExitCode()
		}
		require.NoError(t, err)
		return o.String(), e.String(), 0
	}

	t.Run("whole flow", func(t *testing.T) {
		stdout, stderr, code := exe(t)
		require.Equal(t, 0, code, "stderr: %s\nstdout: %s", stderr, stdout)
		assert.Empty(t, stderr)
		assertNarration(t, stdout, narratedSteps)
	})
	t.Run("verbose logs to stderr", func(t *testing.T) {
		stdout, stderr, code := exe(t, "-v")
		require.Equal(t, 0, code, "stderr: %s", stderr)
		assert.Contains(t, stdout, "done in ")
		for _, want := range []string{"level=DEBUG", "component=agbot", "component=agent", `msg="update applied"`} {
			assert.Contains(t, stderr, want)
		}
	})
	t.Run("bad store config", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "store.json")
		require.NoError(t, os.WriteFile(path, []byte(`{"type":"nosuchstore"}`), 0o600))
		stdout, stderr, code := exe(t, "-store", path)
		assert.Equal(t, 1, code)
		assert.Empty(t, stdout)
		assert.Contains(t, stderr, `quickstart: FAILED: store config: `)
		assert.Contains(t, stderr, `type "nosuchstore" is not registered`)
	})
	t.Run("help", func(t *testing.T) {
		_, stderr, code := exe(t, "-h")
		assert.Equal(t, 0, code)
		assert.Contains(t, stderr, "Usage: quickstart [-store file] [-v]")
		assert.Contains(t, stderr, "Store types: awssm, memory, vault.")
		for _, example := range []string{DefaultStoreConfig, awssmStoreConfigExample, vaultStoreConfigExample} {
			assert.Contains(t, stderr, example)
		}
	})
}

func TestCommandLineErrors(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name     string
		config   string // written to a file; "" means no file
		args     []string
		wantCode int
		wantErr  string
	}{
		{name: "missing file", wantCode: 1, wantErr: "quickstart: reading the store config: "},
		{name: "unregistered type", config: `{"type":"nosuchstore"}`, wantCode: 1, wantErr: `type "nosuchstore" is not registered`},
		{name: "several mistakes", config: `{"type":"memory","defaultScope":"a//b","memory":{"x":1}}`, wantCode: 1, wantErr: "2 problems"},
		{name: "not JSON", config: `type=memory`, wantCode: 1, wantErr: "config is not valid JSON"},
		{name: "unknown flag", args: []string{"-nope"}, wantCode: 2, wantErr: "flag provided but not defined: -nope"},
		{name: "argument", args: []string{"extra"}, wantCode: 2, wantErr: `quickstart: unexpected argument "extra"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := c.args
			if args == nil {
				path := filepath.Join(dir, "missing.json")
				if c.config != "" {
					path = filepath.Join(dir, c.name+".json")
					require.NoError(t, os.WriteFile(path, []byte(c.config), 0o600))
				}
				args = []string{"-store", path}
			}
			var stdout, stderr bytes.Buffer
			assert.Equal(t, c.wantCode, run(args, &stdout, &stderr))
			assert.Contains(t, stderr.String(), c.wantErr)
			assert.Empty(t, stdout.String(), "nothing runs")
		})
	}
}

// runFlow runs the flow in process and returns it (closed), its narration
// and its error.
func runFlow(t *testing.T, opts Options) (*flow, string, error) {
	t.Helper()
	var out bytes.Buffer
	if opts.Out != nil {
		opts.Out = io.MultiWriter(opts.Out, &out)
	} else {
		opts.Out = &out
	}
	if opts.WorkDir == "" {
		opts.WorkDir = t.TempDir()
	}
	f, err := newFlow(opts)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	err = f.run(ctx)
	require.NoError(t, f.close(), "clean-up")
	return f, out.String(), err
}

// assertCleanedUp checks that a finished run left no files and no secrets.
func assertCleanedUp(t *testing.T, f *flow) {
	t.Helper()
	if f.workDir != "" {
		_, err := os.Stat(f.workDir)
		assert.ErrorIs(t, err, os.ErrNotExist, "the work directory is removed")
	}
	if f.admin != nil {
		store, err := secretstore.Open(context.Background(), f.storeConfig, secretstore.OpenOptions{})
		require.NoError(t, err)
		defer store.Close()
		for _, s := range f.secrets {
			_, err := store.Stat(context.Background(), s.storeName())
			assert.ErrorIs(t, err, edgesecrets.ErrNotFound, "secret %s is deleted", s.storeName())
		}
	}
}

// TestFlowOnSecretsManager runs the flow with an AWS Secrets Manager store
// config, against the wire-level endpoint: the -store path with a real
// backend.
func TestFlowOnSecretsManager(t *testing.T) {
	endpoint := smmock.New(smmock.Options{Credentials: map[string]string{"AKIDQUICKSTART": "quickstart-secret-key"}})
	srv := httptest.NewServer(endpoint)
	defer srv.Close()
	config := `{"type": "awssm", "defaultScope": "openhorizon", "awssm": {
		"region": "eu-west-1", "endpoint": "` + srv.URL + `", "forceDelete": true,
		"accessKeyId": "AKIDQUICKSTART", "secretAccessKey": "quickstart-secret-key"}}`

	f, out, err := runFlow(t, Options{StoreConfig: config})
	require.NoError(t, err, out)
	want := append([]string{`hub       opened a "awssm" store (scope "openhorizon")`}, narratedSteps[1:]...)
	assertNarration(t, out, want)
	assert.Positive(t, endpoint.Calls(smmock.OpPutSecretValue), "the rotation went to Secrets Manager")
	assert.Empty(t, endpoint.Names(), "the run deleted what it wrote")
	assertCleanedUp(t, f)
}

// The store configs the usage shows are valid for their backends.
func TestStoreConfigExamples(t *testing.T) {
	for _, example := range []string{DefaultStoreConfig, awssmStoreConfigExample, vaultStoreConfigExample} {
		_, err := secretstore.ParseConfig(strings.NewReader(example))
		assert.NoError(t, err, example)
	}
}

// TestFlowOnVault runs the flow against a real Vault dev server with the
// usage's vault config (KV v2, token auth with the root token taken from
// VAULT_TOKEN), pointed at this server and a fresh mount, and checks that
// the run left the mount empty.
func TestFlowOnVault(t *testing.T) {
	srv := vaulttest.Start(t, vaulttest.Options{})
	mount := srv.EnableKV(t, 2)
	t.Setenv("VAULT_TOKEN", srv.RootToken)
	config := strings.NewReplacer(
		`"http://127.0.0.1:8200"`, strconv.Quote(srv.Addr),
		`"mount": "secret"`, `"mount": `+strconv.Quote(mount),
	).Replace(vaultStoreConfigExample)
	require.Contains(t, config, srv.Addr)
	require.Contains(t, config, strconv.Quote(mount))

	f, out, err := runFlow(t, Options{StoreConfig: config})
	require.NoError(t, err, out)
	want := append([]string{`hub       opened a "vault" store (scope "openhorizon")`}, narratedSteps[1:]...)
	assertNarration(t, out, want)
	assert.Contains(t, out, "rotated the password of myorg/db/web-login: version 1 -> 2 (compare-and-set)",
		"the rotation made a new KV v2 version")
	assert.NotContains(t, out, srv.RootToken)
	assertCleanedUp(t, f)

	// Nothing is left on the mount: no secret, and no metadata of a
	// deleted one.
	left, err := srv.Client(t).Logical().ListWithContext(t.Context(), mount+"/metadata/")
	require.NoError(t, err)
	assert.Nil(t, left, "the mount is empty after the run")
}

// TestFlowFailures breaks the flow at one point and checks that it stops
// there with a message naming the step and the cause, and cleans up.
func TestFlowFailures(t *testing.T) {
	cases := []struct {
		name  string
		after string // step after which to break something
		brk   func(t *testing.T, f *flow)
		want  []string
	}{
		{
			name:  "bound secret missing",
			after: "admin writes secrets",
			brk: func(t *testing.T, f *flow) {
				require.NoError(t, f.admin.store.Delete(t.Context(), f.secrets[1].storeName()))
			},
			want: []string{`step "deployer validates bindings": the good policy is refused:`, "vault_secret_missing", `"user/alice/api-token"`},
		},
		{
			name:  "agent refuses the agbot",
			after: "deployer validates bindings",
			brk: func(t *testing.T, f *flow) {
				other, err := agreement.GenerateKeys("")
				require.NoError(t, err)
				f.pinnedKeys = other.Public() // the agent pins another agbot
			},
			want: []string{`step "agbot deploys the agreement": agbot: ` + theAgreement + ` not in sync after 5s`},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, out, err := runFlow(t, Options{afterStep: func(f *flow, step string) {
				if step == c.after {
					c.brk(t, f)
				}
			}})
			require.Error(t, err)
			for _, w := range c.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, out, "done in")
			assertCleanedUp(t, f)
		})
	}
}

// TestFlowPanicBecomesError checks that a panic in a step ends the run
// with an error naming the step, after which everything is cleaned up.
func TestFlowPanicBecomesError(t *testing.T) {
	f, _, err := runFlow(t, Options{afterStep: func(f *flow, step string) {
		if step == "service reads its secrets" {
			panic("something broke")
		}
	}})
	require.Error(t, err)
	assert.Equal(t, `step "service reads its secrets": panic: something broke`, err.Error())
	assertCleanedUp(t, f)
}

// failingWriter fails every write and keeps what it was asked to write.
type failingWriter struct {
	mu     sync.Mutex
	writes []string
}

var errOutGone = errors.New("output gone")

func (w *failingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, string(p))
	return 0, errOutGone
}

// TestNarrationFailureIsReported checks that a narration Out refuses does
// not stop the run, and that Run reports it.
func TestNarrationFailureIsReported(t *testing.T) {
	out := &failingWriter{}
	err := Run(t.Context(), Options{Out: out, WorkDir: t.TempDir()})
	require.ErrorIs(t, err, errOutGone)
	assert.Equal(t, "writing the narration: output gone", err.Error(), "the flow itself succeeded")
	require.NotEmpty(t, out.writes)
	assert.Contains(t, out.writes[0], "edgesecrets quickstart:")
	assert.Contains(t, out.writes[len(out.writes)-1], "every step did what it should", "the run went on to the end")
}

// TestReplayAfterCancel checks that the exchange cannot bring a cancelled
// agreement's secrets back by replaying its proposal.
func TestReplayAfterCancel(t *testing.T) {
	var replayErr error
	var instances []string
	_, out, err := runFlow(t, Options{afterStep: func(f *flow, step string) {
		if step == "admin deletes the secret" {
			f.agent.forgetOutcomes()
			f.exchange.hand(f.exchange.lastEnvelope(agreement.TypeProposal))
			_, replayErr = f.agent.nextOutcome(t.Context())
			instances = f.agent.Files().InstanceIDs()
		}
	}})
	require.NoError(t, err, out)
	assert.ErrorIs(t, replayErr, agreement.ErrReplay)
	assert.Empty(t, instances)
}
