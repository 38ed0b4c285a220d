package main

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"log"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/internal/testkit/logtest"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// canaries makes every value and credential of a run (Options.NewValue)
// unique and random, and remembers them.
type canaries struct {
	mu     sync.Mutex
	values []string
}

func (c *canaries) newValue() string {
	v := "canary" + rand.Text()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.values = append(c.values, v)
	return v
}

// add makes v a canary too: a value made elsewhere (the agent makes its
// instances' tokens).
func (c *canaries) add(v string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.values = append(c.values, v)
}

func (c *canaries) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.values...)
}

// leakForms returns the forms in which v would show if it leaked: as is,
// in hex, and in standard and URL-safe base64 (padded or not) at each of
// the three alignments it can have inside a longer encoded text. For
// base64, only the characters that depend on v alone are kept.
func leakForms(v string) []string {
	forms := []string{v, hex.EncodeToString([]byte(v)), strings.ToUpper(hex.EncodeToString([]byte(v))),
		decimalBytes(v)} // fmt's %v of []byte
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		for shift := range 3 {
			shifted := append(make([]byte, shift), v...)
			s := enc.EncodeToString(shifted)
			start := 0
			if shift > 0 {
				start = 4 // the first group mixes in the bytes before v
			}
			end := len(shifted) / 3 * 4 // a partial last group mixes in what follows
			forms = append(forms, s[start:end])
		}
	}
	return forms
}

// leaks returns a description of each canary found in text, in any form.
func leaks(text string, values []string) []string {
	var found []string
	for i, v := range values {
		for j, form := range leakForms(v) {
			if strings.Contains(text, form) {
				found = append(found, fmt.Sprintf("value #%d in form #%d", i, j))
			}
		}
	}
	return found
}

func TestLeakForms(t *testing.T) {
	v := "canary" + rand.Text()
	other := "canary" + rand.Text()
	cases := []struct {
		name  string
		text  string
		found bool
	}{
		{"plain", "password=" + v, true},
		{"hex", hex.EncodeToString([]byte("x:" + v + ":y")), true},
		{"upper hex", strings.ToUpper(hex.EncodeToString([]byte(v))), true},
		{"base64 of a JSON file", base64.StdEncoding.EncodeToString([]byte(`{"password":"` + v + `"}`)), true},
		{"base64 shifted by 1", base64.StdEncoding.EncodeToString([]byte("a" + v + "tail")), true},
		{"base64 shifted by 2", base64.RawStdEncoding.EncodeToString([]byte("ab" + v)), true},
		{"base64url", base64.RawURLEncoding.EncodeToString([]byte("abc" + v + "z")), true},
		{"slog JSON of []byte", `{"v":"` + base64.StdEncoding.EncodeToString([]byte(v)) + `"}`, true},
		{"fmt's error path, decimal bytes", fmt.Sprintf("%%!s(*T=&{map[k:%d]})", []byte(v)), true},
		{"another value", other + base64.StdEncoding.EncodeToString([]byte(other)) + hex.EncodeToString([]byte(other)), false},
		{"a prefix only", v[:len(v)-4], false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.found, len(leaks(c.text, []string{v})) > 0)
		})
	}
}

// httpExchange is one request of the flow and its answer.
type httpExchange struct {
	host, method, path string
	status             int
	request, response  []byte
}

// recordingTransport records every request and response body of the flow.
type recordingTransport struct {
	next http.RoundTripper
	mu   sync.Mutex
	log  []httpExchange
}

func (rt *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	x := httpExchange{host: req.URL.Host, method: req.Method, path: req.URL.Path}
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body.Close()
		x.request = b
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	resp, err := rt.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	x.status, x.response = resp.StatusCode, b
	rt.mu.Lock()
	rt.log = append(rt.log, x)
	rt.mu.Unlock()
	return resp, nil
}

// capture holds everything a run put out, for the canary check.
type capture struct {
	canaries  canaries
	logs      logtest.Buffer // JSON and text records, debug level
	narration bytes.Buffer
	errs      []string // error strings from the flow and the probes
	http      recordingTransport
	mu        sync.Mutex
	envelopes [][]byte
	files     map[string][]byte // every file under the work dir, at the check points
	mounted   map[string]bool   // which of those are an instance's secret files
}

// options returns Options that route every output of the run into c,
// with every logger at debug level in both slog formats.
func (c *capture) options(t *testing.T) Options {
	level := &slog.HandlerOptions{Level: slog.LevelDebug, AddSource: true}
	logger := slog.New(slog.NewMultiHandler(slog.NewJSONHandler(&c.logs, level), slog.NewTextHandler(&c.logs, level)))
	// Anything logging through the process defaults is captured too.
	oldDefault, oldOutput := slog.Default(), log.Writer()
	slog.SetDefault(logger)
	log.SetOutput(&c.logs)
	t.Cleanup(func() {
		slog.SetDefault(oldDefault)
		log.SetOutput(oldOutput)
	})
	c.http.next = http.DefaultTransport.(*http.Transport).Clone()
	c.files = map[string][]byte{}
	c.mounted = map[string]bool{}
	return Options{
		Out:           &c.narration,
		Logger:        logger,
		WorkDir:       t.TempDir(),
		HTTPTransport: &c.http,
		NewValue:      c.canaries.newValue,
		OnEnvelope: func(b []byte) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.envelopes = append(c.envelopes, b)
		},
	}
}

func (c *capture) addErr(err error) {
	if err != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.errs = append(c.errs, err.Error())
	}
}

// snapshotFiles reads every file under the run's work directory, noting
// which are instances' secret files (instances/<id>/<name> under the
// agent's root, as agentapi lays them out) or the content a rotation
// replaced, kept in the root's tmp/ for a short grace before it is
// overwritten (a reader that opened it just before still reads it whole).
func (c *capture) snapshotFiles(t *testing.T, f *flow) {
	instances := filepath.Join(f.agent.root, "instances")
	staged := filepath.Join(f.agent.root, "tmp") + string(filepath.Separator)
	err := filepath.WalkDir(f.workDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		c.files[path] = b
		if rel, err := filepath.Rel(instances, path); err == nil && !strings.HasPrefix(rel, "..") && strings.Count(rel, string(filepath.Separator)) == 1 {
			c.mounted[path] = true
		}
		if strings.HasPrefix(path, staged) {
			c.mounted[path] = true
		}
		return nil
	})
	require.NoError(t, err)
}

// probeErrors makes the parties fail in ways that involve the values, and
// keeps the error strings: a refused registration carrying a canary
// attestation, an update carrying canary values that the agent rejects,
// an envelope opened with the wrong keys, store conflicts.
func (c *capture) probeErrors(t *testing.T, f *flow) {
	ctx := t.Context()
	// A stranger registering with a document the provider never made.
	hub, err := identity.NewClient(identity.ClientOptions{BaseURL: f.agbot.api.URL + "/identity"})
	require.NoError(t, err)
	strangerKeys, err := agreement.GenerateKeys("")
	require.NoError(t, err)
	strangerID, err := identity.NewAgent(identity.AgentOptions{Instance: identity.Identity{Provider: f.provider.name, Org: org, Node: "node-2", InstanceID: "agent-2"},
		SigningKey: strangerKeys.Signer(), EncryptionKey: strangerKeys.Public().EncryptionKey(), Hub: hub})
	require.NoError(t, err)
	_, err = strangerID.Register(ctx, identity.Attestation(f.value()))
	require.Error(t, err)
	c.addErr(err)

	secret := f.secrets[0]
	bad, err := agreement.NewSecretsUpdate(f.agreementID, agreement.SecretsUpdate{Services: []agreement.ServiceSecrets{{
		Service: f.target.Services[0],
		Secrets: map[string]agreement.SecretDetails{"no_such_secret": {Data: secret.data}},
	}}})
	require.NoError(t, err)
	_, err = f.agent.Files().ApplyUpdate(ctx, bad)
	require.Error(t, err)
	c.addErr(err)
	c.addErr(fmt.Errorf("reply: %+v", agentapi.ReplyFor(f.agreementID, err)))

	update, err := agreement.NewSecretsUpdate(f.agreementID, agreement.SecretsUpdate{Services: []agreement.ServiceSecrets{{
		Service: f.target.Services[0],
		Secrets: map[string]agreement.SecretDetails{secret.service: {Data: secret.data}},
	}}})
	require.NoError(t, err)
	c.addErr(fmt.Errorf("printed update: %v %+v %#v", update, update, update))
	stranger, err := agreement.GenerateKeys("")
	require.NoError(t, err)
	envelope, err := agreement.Seal(f.agbot.keys, stranger.Public(), update, agreement.Header{Sequence: 99}, agreement.Options{})
	require.NoError(t, err)
	f.agent.forgetOutcomes()
	f.exchange.hand(envelope)
	_, err = f.agent.nextOutcome(ctx)
	require.ErrorIs(t, err, agreement.ErrNotAuthentic)
	c.addErr(err)

	stored, err := f.admin.store.Get(ctx, secret.storeName())
	require.NoError(t, err)
	c.addErr(fmt.Errorf("printed secret: %v %+v %#v %s", stored, stored, stored, stored.Data))
	_, err = f.admin.store.Put(ctx, stored, secretstore.PutOptions{CreateOnly: true})
	require.ErrorIs(t, err, edgesecrets.ErrConflict)
	c.addErr(err)
}

// TestCanary runs the whole flow with unique random values and every
// output captured (DESIGN.md section 7, rule 1): no value or credential
// may appear in any log record (JSON and text, debug level), narrated
// line, error string, HTTP body, envelope or file, except a secret's own
// mounted file and the authorised GET /secrets/{name} response.
func TestCanary(t *testing.T) {
	var c capture
	opts := c.options(t)
	opts.afterStep = func(f *flow, step string) {
		switch step {
		case "service reads its secrets":
			c.canaries.add(f.service.access.token) // the agent made it
			c.snapshotFiles(t, f)
			c.probeErrors(t, f)
		case "service fetches the update":
			c.snapshotFiles(t, f)
		}
	}
	f, out, err := runFlow(t, opts)
	require.NoError(t, err, out)
	c.addErr(err)
	values := c.canaries.all()
	// The admin's three values, the deployer's password, the instance's
	// token, the wrong token of the 401 probe and two attestation documents.
	require.GreaterOrEqual(t, len(values), 8)

	// The channels carry what the check looks for: the canaries did reach
	// the places where they belong, so the scan would see them elsewhere.
	var mountedLeaks, apiLeaks int
	for path := range c.mounted {
		mountedLeaks += len(leaks(string(c.files[path]), values))
	}
	assert.Positive(t, mountedLeaks, "the mounted files hold the values")
	agentHost := strings.TrimPrefix(f.agent.api.URL, "http://")
	secretPath := regexp.MustCompile(`^/secrets/[^/]+$`)
	authorised := func(x httpExchange) bool {
		return x.host == agentHost && x.method == http.MethodGet && secretPath.MatchString(x.path) && x.status == http.StatusOK
	}
	for _, x := range c.http.log {
		if authorised(x) {
			apiLeaks += len(leaks(string(x.response), values))
		}
	}
	assert.Positive(t, apiLeaks, "the authorised GET /secrets/{name} responses hold the values")
	logs := c.logs.String()
	assert.Contains(t, logs, `"level":"DEBUG"`)
	assert.Contains(t, logs, "level=DEBUG")

	// Everywhere else: nothing.
	check := func(what, text string) {
		t.Helper()
		assert.Empty(t, leaks(text, values), "%s leaks a value:\n%s", what, text)
	}
	check("the logs", logs)
	check("the narration", c.narration.String())
	check("an error", strings.Join(c.errs, "\n"))
	for _, x := range c.http.log {
		check(fmt.Sprintf("the request body of %s %s", x.method, x.path), string(x.request))
		if !authorised(x) {
			check(fmt.Sprintf("the response body of %s %s%s (%d)", x.method, x.host, x.path, x.status), string(x.response))
		}
	}
	for i, e := range c.envelopes {
		check(fmt.Sprintf("envelope #%d", i), string(e))
	}
	for path, b := range c.files {
		if !c.mounted[path] {
			check("file "+path, string(b))
		}
	}
	assert.NotEmpty(t, c.envelopes)
	assert.Greater(t, len(c.files), len(c.mounted), "files besides the mounted ones (metadata, status) were scanned")
	assert.Contains(t, c.files, filepath.Join(f.workDir, "agbot", stateFile), "the agbot's delivery state file was scanned")
}

// TestCanaryPanic checks that a panic carrying secret material, in the
// middle of the flow, becomes an error that prints no value.
func TestCanaryPanic(t *testing.T) {
	for _, what := range []string{"secret", "data", "details"} {
		t.Run(what, func(t *testing.T) {
			var c capture
			opts := c.options(t)
			opts.afterStep = func(f *flow, step string) {
				if step != "service reads its secrets" {
					return
				}
				stored, err := f.admin.store.Get(t.Context(), f.secrets[0].storeName())
				require.NoError(t, err)
				switch what {
				case "secret":
					panic(stored)
				case "data":
					panic(stored.Data)
				case "details":
					panic(agreement.SecretDetails{Data: stored.Data})
				}
			}
			f, _, err := runFlow(t, opts)
			require.Error(t, err)
			assert.Contains(t, err.Error(), `step "service reads its secrets": panic: `)
			assert.Contains(t, err.Error(), edgesecrets.Redacted)
			assert.Empty(t, leaks(err.Error(), c.canaries.all()), err.Error())
			assert.Empty(t, leaks(c.logs.String(), c.canaries.all()))
			assertCleanedUp(t, f)
		})
	}
}

// decimalBytes is how fmt's %v prints the bytes of v, without brackets:
// "104 105" for "hi".
func decimalBytes(v string) string {
	parts := make([]string, len(v))
	for i := range len(v) {
		parts[i] = strconv.Itoa(int(v[i]))
	}
	return strings.Join(parts, " ")
}
