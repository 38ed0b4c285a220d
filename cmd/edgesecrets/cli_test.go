package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
)

// Bad command lines exit 2 and say what was wrong, before any request.
func TestUsageErrorsExit2(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("a-token\n"), 0o600))
	// An address nothing listens on: a usage error must come first.
	vars := map[string]string{envAgbotURL: "http://127.0.0.1:1", envAdminToken: "a-token"}
	for _, tc := range []struct {
		name string
		args []string
		vars map[string]string
		want string
	}{
		{"no command", nil, vars, "no command given"},
		{"unknown command", []string{"frobnicate"}, vars, `unknown command "frobnicate"`},
		{"unknown flag", []string{"health", "-bogus"}, vars, "flag provided but not defined: -bogus"},
		{"bad output", []string{"-o", "yaml", "health"}, vars, `-o "yaml": want table or json`},
		{"bad condition", []string{"agreements", "-condition", "sleepy"}, vars, `unknown condition "sleepy"`},
		{"bad reason", []string{"agreements", "-reason", "Tired"}, vars, `unknown reason "Tired"`},
		{"reason with another condition", []string{"agreements", "-condition", "due", "-reason", "SecretAbsent"}, vars, "a reason is for agreements waiting"},
		{"limit too large", []string{"agreements", "-limit", "1001"}, vars, "-limit 1001: want 1 to 1000"},
		{"agreement without id", []string{"agreement"}, vars, "agreement: want 1 argument(s), got 0"},
		{"extra argument", []string{"health", "now"}, vars, "health: want 0 argument(s), got 1"},
		{"no agbot URL", []string{"health"}, map[string]string{envAdminToken: "a-token"}, "no agbot URL: give -agbot or set $EDGESECRETS_AGBOT_URL"},
		{"agbot URL with credentials", []string{"-agbot", "http://admin:pw@127.0.0.1:1", "health"}, vars, "the URL must not hold credentials"},
		{"no token", []string{"health"}, map[string]string{envAgbotURL: "http://127.0.0.1:1"}, "no admin token"},
		{"missing token file", []string{"health", "-token-file", filepath.Join(t.TempDir(), "none")}, vars, "-token-file: open"},
		{"state without inspect", []string{"state"}, vars, "state: want 'state inspect"},
		{"inspect without state", []string{"state", "inspect"}, vars, "-state is required"},
		{"schema for a file", []string{"state", "inspect", "-state", tokenFile, "-schema", "s"}, vars, "-schema is for a postgres:// state"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, tc.vars, tc.args...)
			assert.Equal(t, exitUsage, code, "stderr: %s", errOut)
			assert.Empty(t, out)
			assert.Contains(t, errOut, tc.want)
		})
	}
}

// The installed binary explains its commands and exit codes with -h, and
// exits 2 without a command.
func TestBinaryHelpListsCommandsAndExitCodes(t *testing.T) {
	out, err := exec.Command(program(t, "edgesecrets"), "-h").CombinedOutput()
	require.NoError(t, err, "-h exits 0: %s", out)
	for _, want := range []string{"health", "agreements", "agreement <id>", "release", "state inspect", "-token-file", "Exit codes: 0 ok", "4 not found"} {
		assert.Contains(t, string(out), want)
	}
	out, err = exec.Command(program(t, "edgesecrets")).CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", out)
	assert.Equal(t, exitUsage, exit.ExitCode())
}

// Every command against the running example agbot (a process, with an
// agent): output as table and JSON, exit codes, then its state file
// inspected once it stopped. No output shows the value or the token.
func TestCommandsAgainstExampleAgbot(t *testing.T) {
	h := startHub(t)
	id := h.agreementID(t)

	t.Run("health", func(t *testing.T) {
		code, out, errOut := h.run(t, "health")
		require.Equal(t, exitOK, code, errOut)
		assert.Regexp(t, `(?m)^store\s+ok\s`, out)
		assert.Regexp(t, `(?m)^in_sync\s+-\s+1$`, out)
		code, out, errOut = h.run(t, "health", "-o", "json")
		require.Equal(t, exitOK, code, errOut)
		var hl delivery.Health
		require.NoError(t, json.Unmarshal([]byte(out), &hl))
		assert.Contains(t, hl.Conditions, delivery.ConditionCount{Condition: delivery.ConditionInSync, Agreements: 1})
		assert.Empty(t, hl.StoreProblem)
	})
	t.Run("agreements in sync are not listed", func(t *testing.T) {
		code, out, errOut := h.run(t, "agreements")
		require.Equal(t, exitOK, code, errOut)
		assert.Equal(t, "no agreements\n", out)
	})
	t.Run("agreement", func(t *testing.T) {
		code, out, errOut := h.run(t, "agreement", id)
		require.Equal(t, exitOK, code, errOut)
		assert.Regexp(t, `(?m)^in sync\s+true$`, out)
		assert.Regexp(t, `(?m)^myorg/com.example.web\S*\s+api_key\s+myorg/web/api-key\s+present\s+myorg/web/api-key\s+present$`, out)
		code, out, errOut = h.run(t, "-o", "json", "agreement", id)
		require.Equal(t, exitOK, code, errOut)
		var v statusView
		require.NoError(t, json.Unmarshal([]byte(out), &v))
		assert.Equal(t, id, v.ID)
		assert.True(t, v.InSync)
		require.Len(t, v.Slots, 1)
		assert.Equal(t, contentView{StoreName: storeName, Tag: "present"}, v.Slots[0].Acked)
		require.Len(t, v.Bindings, 1)
		assert.Equal(t, []string{storeName}, v.Bindings[0].Secrets["api_key"])
	})
	t.Run("unknown agreement exits 4", func(t *testing.T) {
		code, out, errOut := h.run(t, "agreement", "no-such-agreement")
		assert.Equal(t, exitNotFound, code)
		assert.Empty(t, out)
		assert.Contains(t, errOut, `agreement "no-such-agreement": no such agreement`)
	})
	t.Run("token from the environment; a wrong one exits 3", func(t *testing.T) {
		code, _, errOut := h.runEnv(t, map[string]string{envAgbotURL: h.url, envAdminToken: h.token}, "health")
		assert.Equal(t, exitOK, code, errOut)
		code, _, errOut = h.runEnv(t, map[string]string{envAgbotURL: h.url, envAdminToken: "wrong-" + h.token[:4]}, "health")
		assert.Equal(t, exitUnreachable, code)
		assert.Contains(t, errOut, "the agbot refused the admin token (401")
	})
	t.Run("release", func(t *testing.T) {
		code, out, errOut := h.run(t, "release")
		require.Equal(t, exitOK, code, errOut)
		assert.Equal(t, "released 0 held cancellation(s)\n", out)
		code, out, errOut = h.run(t, "release", "-o", "json")
		require.Equal(t, exitOK, code, errOut)
		assert.JSONEq(t, `{"released":0}`, out)
	})
	stateFile := filepath.Join(h.dir, "agbot", "agbot-state.db")
	t.Run("a state file the agbot holds exits 3", func(t *testing.T) {
		code, out, errOut := h.run(t, "state", "inspect", "-state", stateFile)
		assert.Equal(t, exitUnreachable, code)
		assert.Empty(t, out)
		assert.Contains(t, errOut, "is in use by another process")
		assert.Contains(t, errOut, "an agbot holds it while it runs")
	})
	t.Run("not in sync exits 1", func(t *testing.T) {
		h.agent.stop()
		h.put(t, "rotated-"+h.value)
		waitFor(t, "the agreement to be listed", func() bool {
			code, out, _ := h.run(t, "agreements")
			return code == exitNotInSync && strings.Contains(out, id)
		}, h.agbot)
		_, out, _ := h.run(t, "agreements")
		assert.Regexp(t, `(?m)^ID\s+NODE\s+CONDITION\s+REASON\s+MESSAGE$`, out)
		code, out, errOut := h.run(t, "-o", "json", "agreements", "-all", "-limit", "1")
		require.Equal(t, exitNotInSync, code, errOut)
		var p delivery.Page
		require.NoError(t, json.Unmarshal([]byte(out), &p))
		require.Len(t, p.Agreements, 1)
		assert.Equal(t, id, p.Agreements[0].ID)
		assert.NotEqual(t, delivery.ConditionInSync, p.Agreements[0].Condition)
		code, out, _ = h.run(t, "agreement", id)
		assert.Equal(t, exitNotInSync, code)
		assert.Regexp(t, `(?m)^in sync\s+false$`, out)
	})

	h.agbot.stop()
	t.Run("a stopped agbot exits 3", func(t *testing.T) {
		code, out, errOut := h.run(t, "health")
		assert.Equal(t, exitUnreachable, code)
		assert.Empty(t, out)
		assert.Contains(t, errOut, "agbot at "+h.url+" unreachable")
	})
	t.Run("state inspect of the file", func(t *testing.T) {
		code, out, errOut := h.run(t, "state", "inspect", "-state", stateFile)
		require.Equal(t, exitOK, code, errOut)
		assert.Regexp(t, `(?m)^agreements\s+1\s+active 1$`, out)
		assert.Regexp(t, `(?m)^`+regexp.QuoteMeta(id)+`\s+\S+\s+active\s+false\s+\d+\s+\d+\s+\d+\s+\S+.*\s+myorg/web/api-key$`, out)
		code, out, errOut = h.run(t, "state", "inspect", "-state", stateFile, "-o", "json")
		require.Equal(t, exitOK, code, errOut)
		var in inspection
		require.NoError(t, json.Unmarshal([]byte(out), &in))
		assert.Equal(t, 1, in.Counts.Agreements)
		require.Len(t, in.Agreements, 1)
		r := in.Agreements[0]
		assert.Equal(t, id, r.ID)
		assert.NotZero(t, r.Epoch)
		assert.NotZero(t, r.ReplySequence)
		require.Len(t, r.Slots, 1)
		assert.Equal(t, "present", r.Slots[0].Desired.Tag)
		assert.Equal(t, "present", r.Slots[0].Acked.Tag)
		code, out, errOut = h.run(t, "state", "inspect", "-state", stateFile, "-agreement", id)
		require.Equal(t, exitOK, code, errOut)
		assert.Regexp(t, `(?m)^reply sequence\s+\d+$`, out)
		assert.Regexp(t, `(?m)^SERVICE\s+SECRET\s+STORE NAMES`, out)
	})
	t.Run("state inspect of an unknown agreement exits 4", func(t *testing.T) {
		code, _, errOut := h.run(t, "state", "inspect", "-state", stateFile, "-agreement", "no-such-agreement")
		assert.Equal(t, exitNotFound, code)
		assert.Contains(t, errOut, `agreement "no-such-agreement": not in the state file`)
	})
	t.Run("a missing state file exits 3 and is not created", func(t *testing.T) {
		missing := filepath.Join(h.dir, "typo.db")
		code, _, errOut := h.run(t, "state", "inspect", "-state", missing)
		assert.Equal(t, exitUnreachable, code)
		assert.Contains(t, errOut, "no state file "+missing)
		assert.NoFileExists(t, missing)
	})
}

// A PostgreSQL state is inspected while the agbot shares it, without
// showing its URL; health exits 1 once the database is down, and state
// inspect exits 3.
func TestPostgresState(t *testing.T) {
	srv := pgtest.Start(t, pgtest.Options{})
	h := startHub(t, "-state", srv.URL, "-member", "cli-test")
	id := h.agreementID(t)

	code, out, errOut := h.run(t, "state", "inspect", "-state", srv.URL)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "PostgreSQL state (schema edgesecrets_delivery)")
	assert.Regexp(t, `(?m)^`+regexp.QuoteMeta(id)+`\s+\S+\s+active\s+true\s`, out)
	code, out, errOut = h.run(t, "-o", "json", "state", "inspect", "-state", srv.URL, "-agreement", id)
	require.Equal(t, exitOK, code, errOut)
	var r recordView
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	assert.True(t, r.InSync)

	require.NoError(t, srv.Stop())
	waitFor(t, "health to report the state's problem", func() bool {
		code, out, _ := h.run(t, "health")
		return code == exitNotInSync && strings.Contains(out, "PROBLEM")
	}, h.agbot)
	code, _, errOut = h.run(t, "-timeout", "5s", "state", "inspect", "-state", srv.URL)
	assert.Equal(t, exitUnreachable, code)
	assert.Contains(t, errOut, "the PostgreSQL state: ")

	h.mu.Lock()
	defer h.mu.Unlock()
	for _, o := range h.outputs {
		assert.NotContains(t, o, srv.URL, "no output shows the database URL")
	}
}
