//go:build unix

package agentapi_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/internal/testkit/logtest"
)

func intPtr(i int) *int { return &i }

// otherID is an id the files can be given: another than the test's when it
// runs as root (as in CI), else its own (chown to oneself works).
func otherID(own int) int {
	if os.Getuid() == 0 {
		return 4242
	}
	return own
}

// proposalWith is agreement ag-1: service A (instance "a") with the secret
// "app" and the options given for it.
func proposalWith(d agreement.SecretDetails, o agentapi.FileOptions) (agreement.Proposal, agentapi.Instances) {
	p := agreement.Proposal{AgreementID: "ag-1", Services: []agreement.ServiceSecrets{
		{Service: refA, Secrets: map[string]agreement.SecretDetails{"app": d}},
	}}
	return p, agentapi.Instances{refA: {ID: "a", Files: map[string]agentapi.FileOptions{"app": o}}}
}

func TestFileOwnerAndModeAsConfigured(t *testing.T) {
	uid, gid := otherID(os.Getuid()), otherID(os.Getgid())
	tests := []struct {
		name             string
		opts             agentapi.FileOptions
		mode             fs.FileMode
		wantUID, wantGID int
		dirOthersSearch  bool
	}{
		{name: "default root-only", mode: 0o400, wantUID: os.Getuid(), wantGID: os.Getgid()},
		{name: "mode 0440", opts: agentapi.FileOptions{Mode: 0o440}, mode: 0o440, wantUID: os.Getuid(), wantGID: os.Getgid()},
		{name: "mode 0640", opts: agentapi.FileOptions{Mode: 0o640}, mode: 0o640, wantUID: os.Getuid(), wantGID: os.Getgid()},
		{name: "owner", opts: agentapi.FileOptions{UID: intPtr(uid)}, mode: 0o400, wantUID: uid, wantGID: os.Getgid(), dirOthersSearch: true},
		{name: "owner, group and mode", opts: agentapi.FileOptions{UID: intPtr(uid), GID: intPtr(gid), Mode: 0o440}, mode: 0o440, wantUID: uid, wantGID: gid, dirOthersSearch: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openStore(t, agentapi.Options{})
			p, inst := proposalWith(jsonSecret("k", "v"), tt.opts)
			_, err := s.ApplyProposal(context.Background(), p, inst)
			require.NoError(t, err)
			fi, err := os.Lstat(mountFile(t, s, "a", "app"))
			require.NoError(t, err)
			assert.Equal(t, tt.mode, fi.Mode())
			u, g, _ := statIDs(t, fi)
			assert.Equal(t, tt.wantUID, u, "owner")
			assert.Equal(t, tt.wantGID, g, "group")
			di, err := os.Lstat(instanceInfo(t, s, "a").MountSource)
			require.NoError(t, err)
			assert.Equal(t, tt.dirOthersSearch, di.Mode().Perm()&0o001 != 0, "others may search the directory only to reach files of other owners")
			assert.Zero(t, di.Mode().Perm()&0o006, "others never list the directory")
		})
	}
}

func TestFileOptionsChangedByAProposalAgainApply(t *testing.T) {
	s := openStore(t, agentapi.Options{})
	p, inst := proposalWith(jsonSecret("k", "v"), agentapi.FileOptions{})
	_, err := s.ApplyProposal(context.Background(), p, inst)
	require.NoError(t, err)
	_, inst = proposalWith(jsonSecret("k", "v"), agentapi.FileOptions{Mode: 0o440})
	_, err = s.ApplyProposal(context.Background(), p, inst)
	require.NoError(t, err)
	fi, err := os.Lstat(mountFile(t, s, "a", "app"))
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o440), fi.Mode())
}

func TestUnsafeFileOptionsAreRefused(t *testing.T) {
	tests := []struct {
		name string
		opts agentapi.FileOptions
		rule string
	}{
		{"world-readable", agentapi.FileOptions{Mode: 0o404}, "nothing for others"},
		{"world-writable", agentapi.FileOptions{Mode: 0o402}, "nothing for others"},
		{"world-executable", agentapi.FileOptions{Mode: 0o401}, "nothing for others"},
		{"setuid", agentapi.FileOptions{Mode: 0o400 | fs.ModeSetuid}, "setuid"},
		{"setgid", agentapi.FileOptions{Mode: 0o400 | fs.ModeSetgid}, "setuid"},
		{"sticky", agentapi.FileOptions{Mode: 0o400 | fs.ModeSticky}, "sticky"},
		{"symlink type", agentapi.FileOptions{Mode: 0o400 | fs.ModeSymlink}, "type bits"},
		{"no owner read", agentapi.FileOptions{Mode: 0o240}, "owner must be able to read"},
		{"negative uid", agentapi.FileOptions{UID: intPtr(-2)}, "uid -2"},
		{"negative gid", agentapi.FileOptions{GID: intPtr(-2)}, "gid -2"},
		{"template and output", agentapi.FileOptions{Template: "x", Output: agentapi.OutputEnv}, "not both"},
		{"unknown output", agentapi.FileOptions{Output: "yaml"}, "unknown output format"},
		{"undefined function", agentapi.FileOptions{Template: `{{ env "HOME" }}`}, `function "env" not defined`},
		{"file access", agentapi.FileOptions{Template: `{{ readFile "/etc/shadow" }}`}, `function "readFile" not defined`},
		{"syntax", agentapi.FileOptions{Template: `{{ .k `}, "template"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inst := agentapi.Instance{ID: "a", Files: map[string]agentapi.FileOptions{"app": tt.opts}}
			err := inst.Check()
			require.ErrorIs(t, err, edgesecrets.ErrInvalid)
			assert.Contains(t, err.Error(), `"app"`, "names the file")
			assert.Contains(t, err.Error(), tt.rule)

			s, root := openStoreRoot(t, agentapi.Options{})
			before := tree(t, root)
			p, insts := proposalWith(jsonSecret("k", "v"), tt.opts)
			_, err = s.ApplyProposal(context.Background(), p, insts)
			require.ErrorIs(t, err, edgesecrets.ErrInvalid)
			assert.Contains(t, err.Error(), tt.rule)
			assert.Equal(t, before, tree(t, root), "nothing is written")
		})
	}
}

const testPEM = "-----BEGIN CERTIFICATE-----\nAQID\n-----END CERTIFICATE-----\n"

func TestTemplatedFiles(t *testing.T) {
	tests := []struct {
		name string
		data []string
		opts agentapi.FileOptions
		want string
	}{
		{"keys and values", []string{"user", "alice", "password", "pw"},
			agentapi.FileOptions{Template: `{{ range keys . }}{{ . }}={{ index $ . }};{{ end }}`}, "password=pw;user=alice;"},
		{"field", []string{"user", "alice"}, agentapi.FileOptions{Template: `user: {{ .user }}`}, "user: alice"},
		{"base64", []string{"v", "a\x00b"}, agentapi.FileOptions{Template: `{{ base64Encode .v }}`}, "YQBi"},
		{"base64 decode", []string{"v", "aGVsbG8="}, agentapi.FileOptions{Template: `{{ base64Decode .v }}`}, "hello"},
		{"json string", []string{"v", `say "hi" <b>`}, agentapi.FileOptions{Template: `{"v":{{ json .v }}}`}, `{"v":"say \"hi\" <b>"}`},
		{"toJSON", []string{"b", "2", "a", "1"}, agentapi.FileOptions{Template: `{{ toJSON . }}`}, `{"a":"1","b":"2"}`},
		{"pemBlock", []string{"der", "\x01\x02\x03"}, agentapi.FileOptions{Template: `{{ pemBlock "CERTIFICATE" .der }}`}, testPEM},
		{"pem passed through", []string{"cert", testPEM}, agentapi.FileOptions{Template: `{{ pem .cert }}`}, testPEM},
		{"envQuote", []string{"v", "a\"b$c`d\\e\nf"}, agentapi.FileOptions{Template: `V={{ envQuote .v }}`}, `V="a\"b\$c\` + "`" + `d\\e\nf"`},
		{"output env", []string{"USER", "alice", "PASS", "p w$"}, agentapi.FileOptions{Output: agentapi.OutputEnv}, "PASS=\"p w\\$\"\nUSER=\"alice\"\n"},
		{"output pem-bundle", []string{"b", testPEM, "a", strings.TrimSpace(testPEM), "user", "alice"},
			agentapi.FileOptions{Output: agentapi.OutputPEMBundle}, testPEM + testPEM},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openStore(t, agentapi.Options{})
			p, inst := proposalWith(jsonSecret(tt.data...), tt.opts)
			_, err := s.ApplyProposal(context.Background(), p, inst)
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(mustRead(t, mountFile(t, s, "a", "app"))))
		})
	}
}

func TestTemplateOverARotatedSecretWritesTheNewFile(t *testing.T) {
	s := openStore(t, agentapi.Options{})
	p, inst := proposalWith(jsonSecret("password", "old"), agentapi.FileOptions{Template: `PASSWORD={{ envQuote .password }}`, Mode: 0o440})
	_, err := s.ApplyProposal(context.Background(), p, inst)
	require.NoError(t, err)
	written, err := s.ApplyUpdate(context.Background(), secretsUpdate(t, agreement.ServiceSecrets{Service: refA,
		Secrets: map[string]agreement.SecretDetails{"app": jsonSecret("password", "new")}}))
	require.NoError(t, err)
	assert.Equal(t, map[string][]string{"a": {"app"}}, written)
	file := mountFile(t, s, "a", "app")
	assert.Equal(t, `PASSWORD="new"`, string(mustRead(t, file)))
	fi, err := os.Lstat(file)
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o440), fi.Mode(), "the rotated file keeps its configured mode")
	assert.Equal(t, []string{"app"}, instanceInfo(t, s, "a").Updated)
}

func TestBrokenTemplateKeepsTheLastGoodFile(t *testing.T) {
	const canary = "CANARY-not-base64-%%%"
	tests := []struct {
		name          string
		opts          agentapi.FileOptions
		first, update []string
	}{
		{"function fails", agentapi.FileOptions{Template: `{{ base64Decode .v }}`}, []string{"v", "aGk="}, []string{"v", canary}},
		{"missing key", agentapi.FileOptions{Template: `{{ .v }}{{ .w }}`}, []string{"v", "a", "w", "b"}, []string{"v", canary}},
		{"env key", agentapi.FileOptions{Output: agentapi.OutputEnv}, []string{"V", "a"}, []string{"not-a-name", canary}},
		{"env NUL", agentapi.FileOptions{Output: agentapi.OutputEnv}, []string{"V", "a"}, []string{"V", canary + "\x00"}},
		{"pem-bundle without PEM", agentapi.FileOptions{Output: agentapi.OutputPEMBundle}, []string{"v", testPEM}, []string{"v", canary}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logger, logs := logtest.NewLogger()
			root := filepath.Join(t.TempDir(), "secrets")
			s, err := agentapi.Open(context.Background(), agentapi.Options{Root: root, Logger: logger})
			require.NoError(t, err)
			t.Cleanup(func() { s.Close() })
			p, inst := proposalWith(jsonSecret(tt.first...), tt.opts)
			_, err = s.ApplyProposal(context.Background(), p, inst)
			require.NoError(t, err)
			file := mountFile(t, s, "a", "app")
			before := mustRead(t, file)

			_, err = s.ApplyUpdate(context.Background(), secretsUpdate(t, agreement.ServiceSecrets{Service: refA,
				Secrets: map[string]agreement.SecretDetails{"app": jsonSecret(tt.update...)}}))
			require.ErrorIs(t, err, agentapi.ErrTemplateFailed)
			require.ErrorIs(t, err, edgesecrets.ErrInvalid)
			assert.Equal(t, before, mustRead(t, file), "the last good file is kept")
			assert.Empty(t, instanceInfo(t, s, "a").Updated)

			reply := agentapi.ReplyFor("ag-1", err)
			assert.False(t, reply.Accepted)
			assert.True(t, strings.HasPrefix(reply.Reason, agentapi.ReasonTemplateFailed+": "), reply.Reason)
			assert.Contains(t, reply.Reason, `"app"`)
			assert.Contains(t, logs.String(), `"level":"WARN","msg":"a template failed; nothing is written and the last good file is kept","instance":"a","secret":"app"`)
			for _, out := range []string{reply.Reason, err.Error(), logs.String()} {
				assert.NotContains(t, out, "CANARY")
			}
		})
	}
}

func TestTemplateFuncsAreDocumented(t *testing.T) {
	assert.Equal(t, []string{"base64Decode", "base64Encode", "envQuote", "json", "keys", "pem", "pemBlock", "toJSON"}, agentapi.TemplateFuncs())
}

// The options are kept with the instance: a rotation after the agent
// restarted renders and owns the file as the proposal declared.
func TestFileOptionsSurviveARestart(t *testing.T) {
	opts := agentapi.Options{Root: filepath.Join(t.TempDir(), "secrets")}
	s, err := agentapi.Open(context.Background(), opts)
	require.NoError(t, err)
	uid := otherID(os.Getuid())
	p, inst := proposalWith(jsonSecret("v", "one"), agentapi.FileOptions{Template: `v={{ .v }}`, Mode: 0o440, UID: intPtr(uid)})
	_, err = s.ApplyProposal(context.Background(), p, inst)
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s, err = agentapi.Open(context.Background(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	_, err = s.ApplyUpdate(context.Background(), secretsUpdate(t, agreement.ServiceSecrets{Service: refA,
		Secrets: map[string]agreement.SecretDetails{"app": jsonSecret("v", "two")}}))
	require.NoError(t, err)
	assertFile(t, mountFile(t, s, "a", "app"), "v=two", 0o440, uid)
}

// assertFile checks a file's content, mode and owner.
func assertFile(t *testing.T, file, content string, mode fs.FileMode, uid int) {
	t.Helper()
	assert.Equal(t, content, string(mustRead(t, file)))
	fi, err := os.Lstat(file)
	require.NoError(t, err)
	assert.Equal(t, mode, fi.Mode())
	u, _, _ := statIDs(t, fi)
	assert.Equal(t, uid, u)
}
