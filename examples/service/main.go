// Command service is a service container of the edgesecrets example: it
// reads its secret files and polls the agent's /secrets API for updates,
// fetching and acknowledging each, as a real service would. Run it with the
// agbot and agent examples (see the README and examples/threeproc_test.go):
//
//	service -env agent-state/env/web.json
//
// Against an agent serving Open Horizon's API (agent -profile openhorizon),
// it calls /api/v1/secrets over HTTPS, trusting the agent's certificate,
// on the agent's unix socket when given, as an Open Horizon service does:
//
//	service -profile openhorizon -cacert agent-state/ess/cert.pem -socket agent-state/ess/essapi.sock -env agent-state/env/web.json
//
// The environment file, written by the agent, stands in for the container's
// environment and its /open-horizon-secrets mount. The service prints one
// line per event on stdout, with a short SHA-256 of the content, never the
// content itself:
//
//	mount <name> <hash>    a secret file appeared or changed in the mount
//	removed <name>         a secret file is gone (the instance was wiped)
//	update <name> <hash>   GET /secrets listed it; GET /secrets/<name> returned this content
//	                       (Open Horizon profile: the secret's "value")
//	ack <name>             POST /secrets/<name>?received=true was accepted
//
// A failed write to stdout does not stop the service; it exits with an
// error naming the first one.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/edgesecrets/edgesecrets/examples/internal/demo"
	"github.com/edgesecrets/edgesecrets/internal/jsonproblem"
)

// Limits on what the service reads.
const (
	maxSecretSize = 1 << 20
	maxListSize   = 64 << 10
	// maxSecretBody bounds GET /secrets/<name>: the content in base64 and
	// the JSON around it.
	maxSecretBody = (maxSecretSize+2)/3*4 + 4<<10
)

func main() {
	envPath := flag.String("env", "", "environment `file` the agent wrote for this service instance (required)")
	profileName := flag.String("profile", "design", "the agent API's `profile`: design or openhorizon")
	caCert := flag.String("cacert", "", "the agent's certificate `file` to trust, for an agent serving HTTPS (Open Horizon: $HZN_ESS_CERT)")
	socket := flag.String("socket", "", "call the agent over this unix socket `path` (Open Horizon: $HZN_ESS_API_ADDRESS), as https://localhost")
	poll := flag.Duration("poll", time.Second, "how often the mount and GET /secrets are checked")
	logLevel := flag.String("log-level", "info", "log `level`: debug, info, warn or error (logs go to stderr and never hold values)")
	demo.SetUsage("service -env <agent env-dir>/<instance>.json [flags]",
		"A service of the edgesecrets example: reads its secret files, polls GET /secrets,\n"+
			"fetches and acknowledges updates, and prints names and short hashes, never values.")
	flag.Parse()
	demo.Main("service", *logLevel, func(log *slog.Logger) error {
		if *envPath == "" {
			return errors.New("-env is required (see -h)")
		}
		if *poll <= 0 {
			return errors.New("-poll must be positive")
		}
		var openHorizon bool
		switch *profileName {
		case "design":
		case "openhorizon":
			openHorizon = true
		default:
			return fmt.Errorf("-profile %q: want design or openhorizon", *profileName)
		}
		var err error
		client := &http.Client{Timeout: 10 * time.Second}
		switch {
		case *caCert != "":
			if client, err = demo.ESSClient(*caCert, *socket); err != nil {
				return err
			}
		case *socket != "":
			return errors.New("-socket needs -cacert: the agent serves HTTPS on its socket")
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		s := &service{envPath: *envPath, out: os.Stdout, log: log, http: client, seen: map[string]string{}, openHorizon: openHorizon}
		if *socket != "" {
			s.base = "https://localhost"
		}
		s.run(ctx, *poll)
		return s.outErr
	})
}

// service is one service instance's view of its secrets.
type service struct {
	envPath string
	out     io.Writer
	log     *slog.Logger
	http    *http.Client
	// openHorizon: the agent serves Open Horizon's /api/v1/secrets.
	openHorizon bool
	// base replaces the environment's API URL (a unix socket's
	// https://localhost).
	base string

	env    demo.Env
	hasEnv bool
	seen   map[string]string // mount file name → short hash
	outErr error             // the first failed write to out
}

// printf prints one event line on out. A failed write does not stop the
// service; the first one is kept and reported when it exits.
func (s *service) printf(format string, args ...any) {
	if _, err := fmt.Fprintf(s.out, format, args...); err != nil && s.outErr == nil {
		s.outErr = fmt.Errorf("writing the events: %w", err)
	}
}

func (s *service) run(ctx context.Context, interval time.Duration) {
	s.log.Info("service started; waiting for its environment file", slog.String("env", s.envPath))
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		s.once(ctx)
		select {
		case <-ctx.Done():
			s.log.Info("service stopping")
			return
		case <-t.C:
		}
	}
}

// once does one round: the environment, the mount, the updates.
func (s *service) once(ctx context.Context) {
	s.readEnv()
	s.scanMount()
	if s.hasEnv {
		s.checkUpdates(ctx)
	}
}

// readEnv re-reads the environment file: the agent rewrites it with a new
// token after a restart and removes it when the instance is withdrawn.
func (s *service) readEnv() {
	env, err := demo.ReadEnv(s.envPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if s.hasEnv {
			s.log.Info("environment file removed: the instance was withdrawn")
		}
		s.hasEnv = false
	case err != nil:
		s.log.Warn("reading the environment file failed", slog.String("err", err.Error()))
		s.hasEnv = false
	default:
		if !s.hasEnv || env != s.env {
			s.log.Info("environment file read", slog.Any("env", env))
		}
		s.env, s.hasEnv = env, true
	}
}

// scanMount reports secret files that appeared, changed or went away.
func (s *service) scanMount() {
	now := map[string]string{}
	if s.hasEnv {
		entries, err := os.ReadDir(s.env.Mount)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("reading the mount failed", slog.String("err", err.Error()))
			return
		}
		for _, e := range entries {
			if !e.Type().IsRegular() {
				continue
			}
			content, err := readFile(filepath.Join(s.env.Mount, e.Name()))
			if err != nil {
				s.log.Warn("reading a secret file failed", slog.String("secret", e.Name()), slog.String("err", err.Error()))
				continue
			}
			now[e.Name()] = shortHash(content)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(now)) {
		if s.seen[name] != now[name] {
			s.printf("mount %s %s\n", name, now[name])
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.seen)) {
		if _, ok := now[name]; !ok {
			s.printf("removed %s\n", name)
		}
	}
	s.seen = now
}

// checkUpdates asks GET /secrets for updated secrets, fetches each and
// acknowledges it.
func (s *service) checkUpdates(ctx context.Context) {
	status, body, err := s.call(ctx, http.MethodGet, s.secretsPath(), maxListSize)
	switch {
	case err != nil:
		s.log.Warn("GET /secrets failed", slog.String("err", err.Error()))
		return
	case status == http.StatusNotFound:
		return // nothing updated
	case status == http.StatusUnauthorized, status == http.StatusForbidden && s.openHorizon:
		s.log.Warn("the agent refused the instance's token; re-reading the environment file")
		return
	case status != http.StatusOK:
		s.log.Warn("GET /secrets", slog.Int("status", status))
		return
	}
	var names []string
	if err := jsonproblem.Decode(bytes.NewReader(body), maxListSize, &names); err != nil {
		s.log.Warn("GET /secrets: bad answer", slog.String("err", err.Error()))
		return
	}
	for _, name := range names {
		content, err := s.fetch(ctx, name)
		if err != nil {
			s.log.Warn("fetching an updated secret failed", slog.String("secret", name), slog.String("err", err.Error()))
			continue
		}
		s.printf("update %s %s\n", name, shortHash(content))
		status, _, err := s.call(ctx, http.MethodPost, s.secretsPath()+"/"+url.PathEscape(name)+"?received=true", maxListSize)
		if err != nil || status != http.StatusCreated {
			s.log.Warn("acknowledging an updated secret failed", slog.String("secret", name), slog.Int("status", status), slog.Any("err", err))
			continue
		}
		s.printf("ack %s\n", name)
	}
}

// secretsPath is the profile's list route.
func (s *service) secretsPath() string {
	if s.openHorizon {
		return "/api/v1/secrets"
	}
	return "/secrets"
}

// fetch returns one secret from GET /secrets/<name>: the file content from
// {"<name>": {"details": "<base64 of the file content>"}}, or in the Open
// Horizon profile the value from {"key": "…", "value": "…"}.
func (s *service) fetch(ctx context.Context, name string) ([]byte, error) {
	status, body, err := s.call(ctx, http.MethodGet, s.secretsPath()+"/"+url.PathEscape(name), maxSecretBody)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("status %d", status)
	}
	if s.openHorizon {
		return decodeKeyValue(body)
	}
	return decodeSecret(body, name)
}

// decodeKeyValue decodes the Open Horizon answer {"key":"…","value":"…"}
// and returns the value. Errors never quote the answer.
func decodeKeyValue(body []byte) ([]byte, error) {
	var answer struct {
		Key   *string `json:"key"`
		Value *string `json:"value"`
	}
	if err := jsonproblem.Decode(bytes.NewReader(body), maxSecretBody, &answer); err != nil {
		return nil, err
	}
	if answer.Key == nil || answer.Value == nil {
		return nil, errors.New(`the answer lacks "key" or "value"`)
	}
	return []byte(*answer.Value), nil
}

// decodeSecret decodes the answer to GET /secrets/<name>, which must be
// for name only. Errors never quote the answer.
func decodeSecret(body []byte, name string) ([]byte, error) {
	var answer map[string]struct {
		Details []byte `json:"details"`
	}
	if err := jsonproblem.Decode(bytes.NewReader(body), maxSecretBody, &answer); err != nil {
		return nil, err
	}
	got, ok := answer[name]
	if !ok || len(answer) != 1 {
		return nil, errors.New("the answer is not for the secret asked for")
	}
	return got.Details, nil
}

// call sends an authenticated request to the agent's /secrets API and
// returns the status and at most limit bytes of the body.
func (s *service) call(ctx context.Context, method, path string, limit int64) (int, []byte, error) {
	base := s.env.API
	if s.base != "" {
		base = s.base
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, nil)
	if err != nil {
		return 0, nil, err
	}
	req.SetBasicAuth(s.env.Instance, s.env.Token)
	resp, err := s.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err == nil && int64(len(body)) > limit {
		err = fmt.Errorf("answer longer than %d bytes", limit)
	}
	return resp.StatusCode, body, err
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read only
	b, err := io.ReadAll(io.LimitReader(f, maxSecretSize+1))
	if err == nil && len(b) > maxSecretSize {
		err = fmt.Errorf("larger than %d bytes", maxSecretSize)
	}
	return b, err
}

// shortHash is the first 12 hex digits of the SHA-256 of content: enough
// to tell versions apart in a demo, and never the value.
func shortHash(content []byte) string {
	sum := sha256.Sum256(content)
	return hex.EncodeToString(sum[:6])
}
