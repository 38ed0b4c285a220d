package agentapi_test

import (
	"context"
	"errors"
	"fmt"
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
)

func TestOpenChecksRoot(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, root string) // nil: root does not exist
		wantErr string                          // "" when Open must succeed
	}{
		{name: "missing root is created"},
		{name: "private root", prepare: func(t *testing.T, root string) { require.NoError(t, os.Mkdir(root, 0o700)) }},
		{name: "group readable", wantErr: "accessible to group or others (mode 0750)", prepare: func(t *testing.T, root string) {
			require.NoError(t, os.Mkdir(root, 0o700))
			require.NoError(t, os.Chmod(root, 0o750))
		}},
		{name: "world searchable", wantErr: "accessible to group or others (mode 0701)", prepare: func(t *testing.T, root string) {
			require.NoError(t, os.Mkdir(root, 0o700))
			require.NoError(t, os.Chmod(root, 0o701))
		}},
		{name: "symlink to a private dir", wantErr: "is a symlink", prepare: func(t *testing.T, root string) {
			real := root + "-real"
			require.NoError(t, os.Mkdir(real, 0o700))
			require.NoError(t, os.Symlink(real, root))
		}},
		{name: "regular file", wantErr: "not a directory", prepare: func(t *testing.T, root string) {
			require.NoError(t, os.WriteFile(root, nil, 0o600))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "secrets")
			if tt.prepare != nil {
				tt.prepare(t, root)
			}
			s, err := agentapi.Open(context.Background(), agentapi.Options{Root: root})
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.ErrorIs(t, err, edgesecrets.ErrInvalid)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			defer s.Close()
			fi, err := os.Lstat(root)
			require.NoError(t, err)
			assert.True(t, fi.IsDir())
			assert.Equal(t, fs.FileMode(0o700), fi.Mode().Perm())
		})
	}
}

func TestOpenRefusesForeignOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the storage root another owner")
	}
	root := filepath.Join(t.TempDir(), "secrets")
	require.NoError(t, os.Mkdir(root, 0o700))
	require.NoError(t, os.Chown(root, 4242, 4242))
	_, err := agentapi.Open(context.Background(), agentapi.Options{Root: root})
	require.ErrorIs(t, err, edgesecrets.ErrInvalid)
	assert.Contains(t, err.Error(), "owned by uid 4242")
}

func TestOpenNeedsRoot(t *testing.T) {
	_, err := agentapi.Open(context.Background(), agentapi.Options{})
	require.ErrorIs(t, err, edgesecrets.ErrInvalid)
	assert.Contains(t, err.Error(), "Options.Root is empty")
}

// testGroup is a group the test may give files: any gid as root, the
// process's own group otherwise.
func testGroup() int {
	if os.Geteuid() == 0 {
		return 4242
	}
	return os.Getegid()
}

func TestModesAndOwnership(t *testing.T) {
	tests := []struct {
		name              string
		instance          agentapi.Instance
		dirMode, fileMode fs.FileMode
		gid               int
	}{
		{name: "default private", instance: agentapi.Instance{ID: "a"}, dirMode: 0o700, fileMode: 0o400, gid: os.Getegid()},
		{name: "group readable", instance: agentapi.Instance{ID: "a", GroupReadable: true, Group: testGroup()}, dirMode: 0o750, fileMode: 0o440, gid: testGroup()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, root := openStoreRoot(t, agentapi.Options{StatusFiles: true})
			p, _ := twoServiceProposal()
			p.Services = p.Services[:1]
			_, err := s.ApplyProposal(context.Background(), p, agentapi.Instances{refA: tt.instance})
			require.NoError(t, err)

			check := func(path string, mode fs.FileMode, gid int) {
				t.Helper()
				fi, err := os.Lstat(path)
				require.NoError(t, err)
				assert.Equal(t, mode, fi.Mode().Perm(), "mode of %s", path)
				assert.Zero(t, fi.Mode()&fs.ModeSymlink, "%s is a symlink", path)
				uid, fgid, _ := statIDs(t, fi)
				assert.Equal(t, os.Geteuid(), uid, "owner of %s", path)
				assert.Equal(t, gid, fgid, "group of %s", path)
			}
			check(root, 0o700, os.Getegid())
			mount := instanceInfo(t, s, "a").MountSource
			check(mount, tt.dirMode, tt.gid)
			check(filepath.Join(mount, "password"), tt.fileMode, tt.gid)
			check(filepath.Join(mount, "cert"), tt.fileMode, tt.gid)
			status := instanceInfo(t, s, "a").StatusDir
			check(status, tt.dirMode, tt.gid)
			check(filepath.Join(status, "SECRETS_PROVIDED"), tt.fileMode, tt.gid)
			check(filepath.Join(root, "meta", "a"), 0o600, os.Getegid())

			// An update keeps the modes and the group.
			_, err = s.ApplyUpdate(context.Background(), secretsUpdate(t, agreement.ServiceSecrets{
				Service: refA, Secrets: map[string]agreement.SecretDetails{"password": jsonSecret("password", "new")},
			}))
			require.NoError(t, err)
			check(filepath.Join(mount, "password"), tt.fileMode, tt.gid)
			check(filepath.Join(status, "SECRETS_UPDATED"), tt.fileMode, tt.gid)
		})
	}
}

func TestBadNamesRejectedAndNothingWritten(t *testing.T) {
	tests := []struct {
		name    string
		secret  string
		problem string
		// updateKind: an update travels as JSON, which turns invalid UTF-8
		// into U+FFFD, so that name arrives valid and unknown.
		updateKind error
	}{
		{"parent escape", "../x", "contains a slash or backslash", nil},
		{"subdirectory", "a/b", "contains a slash or backslash", nil},
		{"backslash", `a\b`, "contains a slash or backslash", nil},
		{"dot", ".", `is "."`, nil},
		{"dot dot", "..", `is ".."`, nil},
		{"empty", "", "is empty", nil},
		{"NUL", "a\x00b", "contains a control character", nil},
		{"newline", "a\nb", "contains a control character", nil},
		{"invalid UTF-8", "a\xffb", "not valid UTF-8", edgesecrets.ErrNotFound},
		{"too long", strings.Repeat("x", 256), "longer than 255 bytes", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Error(t, agreement.CheckSecretName(tt.secret))

			// In a proposal: nothing at all is written, not even the valid secret.
			s, root := openStoreRoot(t, agentapi.Options{StatusFiles: true})
			before := tree(t, root)
			p := agreement.Proposal{AgreementID: "ag-1", Services: []agreement.ServiceSecrets{{
				Service: refA, Secrets: map[string]agreement.SecretDetails{
					"good": jsonSecret("k", "v"), tt.secret: jsonSecret("k", "v"),
				},
			}}}
			_, err := s.ApplyProposal(context.Background(), p, agentapi.Instances{refA: {ID: "a"}})
			require.ErrorIs(t, err, edgesecrets.ErrInvalid)
			assert.Contains(t, err.Error(), tt.problem)
			assert.Contains(t, err.Error(), "secret name")
			assert.Equal(t, before, tree(t, root), "files written for a rejected proposal")
			assert.Empty(t, s.InstanceIDs())

			// As an instance id.
			p.Services[0].Secrets = map[string]agreement.SecretDetails{"good": jsonSecret("k", "v")}
			_, err = s.ApplyProposal(context.Background(), p, agentapi.Instances{refA: {ID: tt.secret}})
			require.ErrorIs(t, err, edgesecrets.ErrInvalid)
			assert.Contains(t, err.Error(), "instance id")
			assert.Contains(t, err.Error(), tt.problem)
			assert.Equal(t, before, tree(t, root))

			// In an update: rejected, the valid secret of the same update is not written.
			_, err = s.ApplyProposal(context.Background(), p, agentapi.Instances{refA: {ID: "a"}})
			require.NoError(t, err)
			file := mountFile(t, s, "a", "good")
			old := mustRead(t, file)
			_, err = s.ApplyUpdate(context.Background(), secretsUpdate(t, agreement.ServiceSecrets{
				Service: refA, Secrets: map[string]agreement.SecretDetails{"good": jsonSecret("k", "new"), tt.secret: jsonSecret("k", "v")},
			}))
			if tt.updateKind != nil {
				require.ErrorIs(t, err, tt.updateKind)
			} else {
				require.ErrorIs(t, err, edgesecrets.ErrInvalid)
				assert.Contains(t, err.Error(), tt.problem)
			}
			assert.Equal(t, old, mustRead(t, file))
			info, _ := s.Instance("a")
			assert.Empty(t, info.Updated)
		})
	}
}

func TestCheckInstanceIDRejectsColon(t *testing.T) {
	s := openStore(t, agentapi.Options{})
	p, _ := twoServiceProposal()
	p.Services = p.Services[:1]
	_, err := s.ApplyProposal(context.Background(), p, agentapi.Instances{refA: {ID: "a:b"}})
	require.ErrorIs(t, err, edgesecrets.ErrInvalid)
	assert.Contains(t, err.Error(), "colon")
}

func TestFileContent(t *testing.T) {
	binary := []byte{0xff, 0x00, 0xfe}
	tests := []struct {
		name    string
		details agreement.SecretDetails
		want    string
		wantErr string
	}{
		{name: "json object, keys sorted, no HTML escaping",
			details: jsonSecret("user", "bob", "password", `p<&>"w`),
			want:    `{"password":"p<&>\"w","user":"bob"}`},
		{name: "default format is json", details: agreement.SecretDetails{Data: edgesecrets.Data{"k": []byte("v")}},
			want: `{"k":"v"}`},
		{name: "binary value in json becomes a base64 object",
			details: agreement.SecretDetails{Data: edgesecrets.Data{"key": binary, "id": []byte("x")}},
			want:    `{"id":"x","key":{"base64":"/wD+"}}`},
		{name: "empty json secret", details: agreement.SecretDetails{Format: agreement.FormatJSON}, want: `{}`},
		{name: "raw keeps bytes", details: rawSecret(binary), want: string(binary)},
		{name: "raw empty value", details: rawSecret(nil), want: ""},
		{name: "raw needs one key", details: agreement.SecretDetails{Format: agreement.FormatRaw, Data: edgesecrets.Data{"a": nil, "b": nil}},
			wantErr: `format "raw" needs exactly one key, or Open Horizon's "key" and "value"; has 2 keys`},
		{name: "unknown format", details: agreement.SecretDetails{Format: "yaml", Data: edgesecrets.Data{"a": nil}},
			wantErr: `unknown format "yaml"`},
		{name: "key not UTF-8", details: agreement.SecretDetails{Data: edgesecrets.Data{"\xff": nil}},
			wantErr: "key is not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openStore(t, agentapi.Options{})
			p := agreement.Proposal{AgreementID: "ag-1", Services: []agreement.ServiceSecrets{{
				Service: refA, Secrets: map[string]agreement.SecretDetails{"s": tt.details},
			}}}
			_, err := s.ApplyProposal(context.Background(), p, agentapi.Instances{refA: {ID: "a"}})
			if tt.wantErr != "" {
				require.ErrorIs(t, err, edgesecrets.ErrInvalid)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Contains(t, err.Error(), `secret "s"`)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(mustRead(t, mountFile(t, s, "a", "s"))))
			got, err := s.ReadSecret(context.Background(), "a", "s")
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(got))
		})
	}
}

func TestApplyProposalChecks(t *testing.T) {
	ctx := context.Background()
	s, root := openStoreRoot(t, agentapi.Options{})
	applyTwoServices(t, s)

	tests := []struct {
		name      string
		proposal  agreement.Proposal
		instances agentapi.Instances
		kind      error
		want      []string
	}{
		{name: "no agreement id", proposal: agreement.Proposal{}, kind: edgesecrets.ErrInvalid, want: []string{"agreement id is empty"}},
		{name: "service without instance",
			proposal: agreement.Proposal{AgreementID: "ag-2", Services: []agreement.ServiceSecrets{
				{Service: agreement.ServiceRef{Org: "o", URL: "x"}, Secrets: map[string]agreement.SecretDetails{"s": jsonSecret()}}}},
			instances: agentapi.Instances{}, kind: edgesecrets.ErrInvalid, want: []string{`no instance was given for service "o/x"`}},
		{name: "instance of another agreement",
			proposal: agreement.Proposal{AgreementID: "ag-2", Services: []agreement.ServiceSecrets{
				{Service: refA, Secrets: map[string]agreement.SecretDetails{"s": jsonSecret()}}}},
			instances: agentapi.Instances{refA: {ID: "a"}}, kind: edgesecrets.ErrConflict,
			want: []string{`instance "a" already holds the secrets of agreement "ag-1"`}},
		{name: "one instance for two services, every problem reported",
			proposal: agreement.Proposal{AgreementID: "ag-2", Services: []agreement.ServiceSecrets{
				{Service: refA, Secrets: map[string]agreement.SecretDetails{"s": jsonSecret()}},
				{Service: refB, Secrets: map[string]agreement.SecretDetails{"../s": jsonSecret()}}}},
			instances: agentapi.Instances{refA: {ID: "c"}, refB: {ID: "c"}}, kind: edgesecrets.ErrInvalid,
			want: []string{`instance "c" is given for more than one service`}},
		{name: "negative group",
			proposal: agreement.Proposal{AgreementID: "ag-2", Services: []agreement.ServiceSecrets{
				{Service: refA, Secrets: map[string]agreement.SecretDetails{"s": jsonSecret()}}}},
			instances: agentapi.Instances{refA: {ID: "c", GroupReadable: true, Group: -5}}, kind: edgesecrets.ErrInvalid,
			want: []string{"group id -5 is negative"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tree(t, root)
			_, err := s.ApplyProposal(ctx, tt.proposal, tt.instances)
			require.ErrorIs(t, err, tt.kind)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.Equal(t, before, tree(t, root))
			assert.Equal(t, []string{"a", "b"}, s.InstanceIDs())
		})
	}
}

func TestReapplyProposalIsIdempotent(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, agentapi.Options{})
	applyTwoServices(t, s)
	_, err := s.ApplyUpdate(ctx, secretsUpdate(t, agreement.ServiceSecrets{Service: refA,
		Secrets: map[string]agreement.SecretDetails{"password": jsonSecret("password", "v2")}}))
	require.NoError(t, err)
	cert := mountFile(t, s, "a", "cert")

	// The same proposal again, without "cert" and with the old password.
	p, inst := twoServiceProposal()
	delete(p.Services[0].Secrets, "cert")
	changes, err := s.ApplyProposal(ctx, p, inst)
	require.NoError(t, err)
	assert.Equal(t, map[string][]string{"a": {"password"}}, changes, "only the changed file is written")
	_, err = os.Lstat(cert)
	assert.ErrorIs(t, err, fs.ErrNotExist, "a name dropped from the proposal is removed")
	info, _ := s.Instance("a")
	assert.Equal(t, []string{"password"}, info.Secrets)
	assert.Equal(t, []string{"password"}, info.Updated, "a proposal keeps the updated names")
}

func TestApplyUpdate(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, agentapi.Options{})
	applyTwoServices(t, s)

	changes, err := s.ApplyUpdate(ctx, secretsUpdate(t,
		agreement.ServiceSecrets{Service: refA, Secrets: map[string]agreement.SecretDetails{
			"password": jsonSecret("user", "alice", "password", "rotated"),
			"cert":     rawSecret([]byte("-----BEGIN CERT A-----")), // unchanged
		}}))
	require.NoError(t, err)
	assert.Equal(t, map[string][]string{"a": {"password"}}, changes)
	assert.Equal(t, `{"password":"rotated","user":"alice"}`, string(mustRead(t, mountFile(t, s, "a", "password"))))
	info, _ := s.Instance("a")
	assert.Equal(t, []string{"password"}, info.Updated)
	infoB, _ := s.Instance("b")
	assert.Empty(t, infoB.Updated)
}

func TestApplyUpdateRejects(t *testing.T) {
	ctx := context.Background()
	good := map[string]agreement.SecretDetails{"password": jsonSecret("password", "new")}
	tests := []struct {
		name   string
		update func(t *testing.T) agreement.Update
		kind   error
		want   string
	}{
		{name: "unknown secret", kind: edgesecrets.ErrNotFound, want: `service "acme/svc-a arch amd64 version 1.0.0" (instance "a") has no secret "token"`,
			update: func(t *testing.T) agreement.Update {
				return secretsUpdate(t, agreement.ServiceSecrets{Service: refA, Secrets: map[string]agreement.SecretDetails{
					"password": jsonSecret("password", "new"), "token": jsonSecret("t", "x")}})
			}},
		{name: "unknown service", kind: edgesecrets.ErrNotFound, want: `the agreement has no service "acme/other"`,
			update: func(t *testing.T) agreement.Update {
				return secretsUpdate(t,
					agreement.ServiceSecrets{Service: refA, Secrets: good},
					agreement.ServiceSecrets{Service: agreement.ServiceRef{Org: "acme", URL: "other"}, Secrets: good})
			}},
		{name: "unknown agreement", kind: edgesecrets.ErrNotFound, want: `no instance holds secrets of agreement "ag-9"`,
			update: func(t *testing.T) agreement.Update {
				u, err := agreement.NewSecretsUpdate("ag-9", agreement.SecretsUpdate{Services: []agreement.ServiceSecrets{{Service: refA, Secrets: good}}})
				require.NoError(t, err)
				return u
			}},
		{name: "unknown kind", kind: edgesecrets.ErrInvalid, want: `update kind is "policy"`,
			update: func(t *testing.T) agreement.Update {
				return agreement.Update{AgreementID: "ag-1", Kind: "policy", Payload: []byte(`{}`)}
			}},
		{name: "bad raw secret", kind: edgesecrets.ErrInvalid, want: "needs exactly one key",
			update: func(t *testing.T) agreement.Update {
				return secretsUpdate(t, agreement.ServiceSecrets{Service: refA, Secrets: map[string]agreement.SecretDetails{
					"password": jsonSecret("password", "new"), "cert": {Format: agreement.FormatRaw}}})
			}},
		{name: "service listed twice", kind: edgesecrets.ErrInvalid, want: "appears twice",
			update: func(t *testing.T) agreement.Update {
				return secretsUpdate(t, agreement.ServiceSecrets{Service: refA, Secrets: good}, agreement.ServiceSecrets{Service: refA, Secrets: good})
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, root := openStoreRoot(t, agentapi.Options{StatusFiles: true})
			applyTwoServices(t, s)
			before := map[string][]byte{}
			for _, f := range tree(t, root) {
				if fi, err := os.Stat(filepath.Join(root, f)); err == nil && fi.Mode().IsRegular() {
					before[f] = mustRead(t, filepath.Join(root, f))
				}
			}
			changes, err := s.ApplyUpdate(ctx, tt.update(t))
			require.ErrorIs(t, err, tt.kind)
			assert.Contains(t, err.Error(), tt.want)
			assert.Empty(t, changes)
			after := map[string][]byte{}
			for _, f := range tree(t, root) {
				if fi, err := os.Stat(filepath.Join(root, f)); err == nil && fi.Mode().IsRegular() {
					after[f] = mustRead(t, filepath.Join(root, f))
				}
			}
			assert.Equal(t, before, after, "a rejected update wrote something")
			reply := agentapi.ReplyFor("ag-1", err)
			assert.False(t, reply.Accepted)
			assert.Contains(t, reply.Reason, tt.want)
		})
	}
}

func TestUnchangedUpdateKeepsMtime(t *testing.T) {
	ctx := context.Background()
	s, root := openStoreRoot(t, agentapi.Options{StatusFiles: true})
	applyTwoServices(t, s)
	file := mountFile(t, s, "a", "password")
	meta := filepath.Join(root, "meta", "a")
	past := mustParseTime(t, "2001-02-03T04:05:06Z")
	require.NoError(t, os.Chtimes(file, past, past))
	require.NoError(t, os.Chtimes(meta, past, past))

	changes, err := s.ApplyUpdate(ctx, secretsUpdate(t, agreement.ServiceSecrets{Service: refA,
		Secrets: map[string]agreement.SecretDetails{"password": jsonSecret("user", "alice", "password", "s3cr3t-A")}}))
	require.NoError(t, err)
	assert.Empty(t, changes)
	for _, f := range []string{file, meta} {
		fi, err := os.Stat(f)
		require.NoError(t, err)
		assert.True(t, fi.ModTime().Equal(past), "%s rewritten: mtime %v", f, fi.ModTime())
	}
	info, _ := s.Instance("a")
	assert.Empty(t, info.Updated, "an unchanged secret is not an update")
	status := instanceInfo(t, s, "a").StatusDir
	assert.NoFileExists(t, filepath.Join(status, "SECRETS_UPDATED"))

	// A changed value is written: the mtime moves.
	_, err = s.ApplyUpdate(ctx, secretsUpdate(t, agreement.ServiceSecrets{Service: refA,
		Secrets: map[string]agreement.SecretDetails{"password": jsonSecret("user", "alice", "password", "other")}}))
	require.NoError(t, err)
	fi, err := os.Stat(file)
	require.NoError(t, err)
	assert.False(t, fi.ModTime().Equal(past))
}

func TestStatusFiles(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, agentapi.Options{StatusFiles: true})
	applyTwoServices(t, s)
	status := instanceInfo(t, s, "a").StatusDir
	assert.FileExists(t, filepath.Join(status, "SECRETS_PROVIDED"))
	assert.NoFileExists(t, filepath.Join(status, "SECRETS_UPDATED"))

	_, err := s.ApplyUpdate(ctx, secretsUpdate(t, agreement.ServiceSecrets{Service: refA, Secrets: map[string]agreement.SecretDetails{
		"password": jsonSecret("password", "2"), "cert": rawSecret([]byte("2"))}}))
	require.NoError(t, err)
	assert.Equal(t, "cert\npassword\n", string(mustRead(t, filepath.Join(status, "SECRETS_UPDATED"))))

	require.NoError(t, s.Acknowledge(ctx, "a", "cert"))
	assert.Equal(t, "password\n", string(mustRead(t, filepath.Join(status, "SECRETS_UPDATED"))))
	require.NoError(t, s.Acknowledge(ctx, "a", "password"))
	assert.NoFileExists(t, filepath.Join(status, "SECRETS_UPDATED"))

	_, err = s.ApplyUpdate(ctx, secretsUpdate(t, agreement.ServiceSecrets{Service: refA, Secrets: map[string]agreement.SecretDetails{
		"password": jsonSecret("password", "3")}}))
	require.NoError(t, err)
	assert.FileExists(t, filepath.Join(status, "SECRETS_UPDATED"))
	require.NoError(t, s.ServiceRestarted(ctx, "a"))
	assert.NoFileExists(t, filepath.Join(status, "SECRETS_UPDATED"))

	// Without the option there is no status directory.
	plain := openStore(t, agentapi.Options{})
	applyTwoServices(t, plain)
	dir := instanceInfo(t, plain, "a").StatusDir
	assert.NoDirExists(t, dir)
}

func TestAcknowledgeAndRestart(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, agentapi.Options{})
	applyTwoServices(t, s)
	_, err := s.ApplyUpdate(ctx, secretsUpdate(t, agreement.ServiceSecrets{Service: refA, Secrets: map[string]agreement.SecretDetails{
		"password": jsonSecret("password", "2"), "cert": rawSecret([]byte("2"))}}))
	require.NoError(t, err)

	require.NoError(t, s.Acknowledge(ctx, "a", "cert"))
	info, _ := s.Instance("a")
	assert.Equal(t, []string{"password"}, info.Updated)
	assert.Equal(t, []string{"cert"}, info.Acknowledged)

	// A new update of an acknowledged name makes it updated again.
	_, err = s.ApplyUpdate(ctx, secretsUpdate(t, agreement.ServiceSecrets{Service: refA, Secrets: map[string]agreement.SecretDetails{
		"cert": rawSecret([]byte("3"))}}))
	require.NoError(t, err)
	info, _ = s.Instance("a")
	assert.Equal(t, []string{"cert", "password"}, info.Updated)
	assert.Empty(t, info.Acknowledged)

	require.NoError(t, s.ServiceRestarted(ctx, "a"))
	info, _ = s.Instance("a")
	assert.Empty(t, info.Updated)

	assert.ErrorIs(t, s.Acknowledge(ctx, "a", "token"), edgesecrets.ErrNotFound, "b's secret is not a's")
	assert.ErrorIs(t, s.Acknowledge(ctx, "zz", "cert"), edgesecrets.ErrNotFound)
	assert.ErrorIs(t, s.Acknowledge(ctx, "a", "../b/token"), edgesecrets.ErrInvalid)
	assert.ErrorIs(t, s.ServiceRestarted(ctx, "zz"), edgesecrets.ErrNotFound)
}

func TestRestartKeepsState(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "secrets")
	s, err := agentapi.Open(ctx, agentapi.Options{Root: root})
	require.NoError(t, err)
	applyTwoServices(t, s)
	_, err = s.ApplyUpdate(ctx, secretsUpdate(t,
		agreement.ServiceSecrets{Service: refA, Secrets: map[string]agreement.SecretDetails{
			"password": jsonSecret("password", "2"), "cert": rawSecret([]byte("2"))}},
		agreement.ServiceSecrets{Service: refB, Secrets: map[string]agreement.SecretDetails{"token": rawSecret([]byte("2"))}}))
	require.NoError(t, err)
	require.NoError(t, s.Acknowledge(ctx, "a", "cert"))
	require.NoError(t, s.ServiceRestarted(ctx, "b"))
	wantA, _ := s.Instance("a")
	wantB, _ := s.Instance("b")
	require.NoError(t, s.Close())

	s2, err := agentapi.Open(ctx, agentapi.Options{Root: root})
	require.NoError(t, err)
	defer s2.Close()
	assert.Equal(t, []string{"a", "b"}, s2.InstanceIDs())
	gotA, _ := s2.Instance("a")
	gotB, _ := s2.Instance("b")
	assert.Equal(t, wantA, gotA)
	assert.Equal(t, wantB, gotB)
	assert.Equal(t, []string{"password"}, gotA.Updated)
	assert.Equal(t, []string{"cert"}, gotA.Acknowledged)
	assert.Empty(t, gotB.Updated)

	// The reopened store still skips unchanged content and updates changed content.
	changes, err := s2.ApplyUpdate(ctx, secretsUpdate(t, agreement.ServiceSecrets{Service: refA, Secrets: map[string]agreement.SecretDetails{
		"password": jsonSecret("password", "2"), "cert": rawSecret([]byte("3"))}}))
	require.NoError(t, err)
	assert.Equal(t, map[string][]string{"a": {"cert"}}, changes)
}

func TestOpenWipesLeftovers(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "secrets")
	s, err := agentapi.Open(ctx, agentapi.Options{Root: root, StatusFiles: true})
	require.NoError(t, err)
	applyTwoServices(t, s)
	require.NoError(t, s.Close())

	leftovers := []string{
		"tmp/partial-staging-file",
		"instances/orphan/secret",
		"instances/a/stray",
		"status/orphan/SECRETS_PROVIDED",
	}
	for _, l := range leftovers {
		p := filepath.Join(root, l)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
		require.NoError(t, os.WriteFile(p, []byte("leftover"), 0o600))
	}
	// An interrupted removal: files and directory gone, metadata left.
	require.NoError(t, os.RemoveAll(filepath.Join(root, "instances", "b")))

	s, err = agentapi.Open(ctx, agentapi.Options{Root: root, StatusFiles: true})
	require.NoError(t, err)
	defer s.Close()
	for _, l := range leftovers {
		assert.NoFileExists(t, filepath.Join(root, l))
	}
	assert.NoDirExists(t, filepath.Join(root, "instances", "orphan"))
	assert.Equal(t, []string{"a"}, s.InstanceIDs(), "the interrupted removal of b is finished")
	assert.NoFileExists(t, filepath.Join(root, "meta", "b"))
	assert.FileExists(t, mountFile(t, s, "a", "password"))
	assert.FileExists(t, mountFile(t, s, "a", "cert"))
}

func TestOpenRejectsCorruptMetadata(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "secrets")
	s, err := agentapi.Open(ctx, agentapi.Options{Root: root})
	require.NoError(t, err)
	applyTwoServices(t, s)
	require.NoError(t, s.Close())
	require.NoError(t, os.WriteFile(filepath.Join(root, "meta", "a"), []byte(`{"version":1,"id":"b"}`), 0o600))
	_, err = agentapi.Open(ctx, agentapi.Options{Root: root})
	require.ErrorIs(t, err, edgesecrets.ErrInvalid)
	assert.Contains(t, err.Error(), `metadata of instance "a"`)
	assert.Contains(t, err.Error(), `records instance id "b"`)
}

func TestReply(t *testing.T) {
	assert.Equal(t, agreement.Reply{Version: 1, AgreementID: "ag", Accepted: true}, agentapi.ReplyFor("ag", nil))
	bad := agentapi.ReplyFor("ag", fmt.Errorf("secret name %q: %w: contains a slash", "a/b", edgesecrets.ErrInvalid))
	assert.False(t, bad.Accepted)
	assert.Contains(t, bad.Reason, `"a/b"`)
	local := agentapi.ReplyFor("ag", &fs.PathError{Op: "open", Path: "/var/lib/x", Err: errors.New("no space left on device")})
	assert.False(t, local.Accepted)
	assert.Equal(t, "the agent could not store the secrets", local.Reason)
	assert.False(t, bad.Unknown || local.Unknown)

	// An update of an agreement no instance holds (the files lost, the
	// keys kept) says the agreement is unknown, for the agbot to propose
	// it again; an unknown service of a known one does not.
	ctx := t.Context()
	s, err := agentapi.Open(ctx, agentapi.Options{Root: filepath.Join(t.TempDir(), "agent")})
	require.NoError(t, err)
	defer s.Close()
	u, err := agreement.NewSecretsUpdate("ag", agreement.SecretsUpdate{Services: []agreement.ServiceSecrets{{
		Service: agreement.ServiceRef{Org: "org", URL: "svc", Version: "1.0.0"},
		Secrets: map[string]agreement.SecretDetails{"pw": {Data: edgesecrets.Data{"password": []byte("v")}}},
	}}})
	require.NoError(t, err)
	_, err = s.ApplyUpdate(ctx, u)
	require.ErrorIs(t, err, edgesecrets.ErrNotFound)
	unknown := agentapi.ReplyFor("ag", err)
	assert.False(t, unknown.Accepted)
	assert.True(t, unknown.Unknown)
	assert.Contains(t, unknown.Reason, `no instance holds secrets of agreement "ag"`)
}
