package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
)

// service is the service container: it reads its secrets from the files
// mounted at /open-horizon-secrets and asks the agent's /secrets API which
// of them were updated since it started.
type service struct {
	access serviceAccess
	mount  string // the directory the container sees as agentapi.MountTarget
	api    string // the agent's API base URL
	client *http.Client
	say    *narrator
}

// serviceReads is the service starting: it reads its mounted files, and
// finds nothing updated yet. A caller without its token gets nothing.
func (f *flow) serviceReads(ctx context.Context) error {
	access, err := f.agent.access(f.agreementID)
	if err != nil {
		return err
	}
	f.service = &service{access: access, mount: access.mount, api: f.agent.api.URL, client: f.client, say: f.say}
	for _, s := range f.secrets {
		content, err := f.service.readFile(s.service)
		if err != nil {
			return err
		}
		if err := s.check(content); err != nil {
			return err
		}
		f.say.sayf("service", "read %s/%s: %s, as the admin wrote it", agentapi.MountTarget, s.service, s.describe(content))
	}

	if _, err := f.service.expect(ctx, http.StatusNotFound, http.MethodGet, "/secrets", access.token); err != nil {
		return fmt.Errorf("before any update: %w", err)
	}
	f.say.sayf("service", "GET /secrets -> 404: nothing updated since it started")

	body, err := f.service.expect(ctx, http.StatusUnauthorized, http.MethodGet, "/secrets/"+f.secrets[0].service, f.value())
	if err != nil {
		return fmt.Errorf("with a wrong token: %w", err)
	}
	f.say.sayf("service", "GET /secrets/%s with a wrong token -> 401 %s", f.secrets[0].service, bytes.TrimSpace(body))
	return nil
}

// serviceFetchesUpdate is the service noticing the rotated secret in
// GET /secrets, fetching it and acknowledging it.
func (f *flow) serviceFetchesUpdate(ctx context.Context) error {
	s := f.secrets[0]
	names, err := f.service.updated(ctx)
	if err != nil {
		return err
	}
	if !slices.Equal(names, []string{s.service}) {
		return fmt.Errorf("GET /secrets lists %q, want [%s]", names, s.service)
	}
	f.say.sayf("service", "GET /secrets -> 200 [%s]", strings.Join(names, ", "))

	content, err := f.service.fetch(ctx, s.service)
	if err != nil {
		return err
	}
	if err := s.check(content); err != nil {
		return fmt.Errorf("GET /secrets/%s: %w", s.service, err)
	}
	mounted, err := f.service.readFile(s.service)
	if err != nil {
		return err
	}
	if !bytes.Equal(mounted, content) {
		return fmt.Errorf("the mounted file %s differs from what GET /secrets/%s returned", s.service, s.service)
	}
	f.say.sayf("service", "GET /secrets/%s -> 200: %s, the rotated value (the mounted file has it too)", s.service, s.describe(content))

	ack := "/secrets/" + url.PathEscape(s.service) + "?received=true"
	if _, err := f.service.expect(ctx, http.StatusCreated, http.MethodPost, ack, f.service.access.token); err != nil {
		return err
	}
	f.say.sayf("service", "POST %s -> 201", ack)
	if _, err := f.service.expect(ctx, http.StatusNotFound, http.MethodGet, "/secrets", f.service.access.token); err != nil {
		return fmt.Errorf("after the acknowledgement: %w", err)
	}
	f.say.sayf("service", "GET /secrets -> 404: nothing left to fetch")
	return nil
}

// readFile reads one of the mounted secret files.
func (s *service) readFile(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join(s.mount, name))
}

// expect makes one request to the agent's API with the instance's id and
// the given token, and returns the body if the status is want.
func (s *service) expect(ctx context.Context, want int, method, path, token string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.api+path, nil)
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth(s.access.instanceID, token)
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		return nil, fmt.Errorf("%s %s: status %d, want %d", method, path, resp.StatusCode, want)
	}
	return body, nil
}

// updated returns GET /secrets: the names updated and not yet acknowledged.
func (s *service) updated(ctx context.Context) ([]string, error) {
	body, err := s.expect(ctx, http.StatusOK, http.MethodGet, "/secrets", s.access.token)
	if err != nil {
		return nil, err
	}
	var names []string
	if err := json.Unmarshal(body, &names); err != nil {
		return nil, fmt.Errorf("GET /secrets: %w", err)
	}
	return names, nil
}

// fetch returns GET /secrets/{name}: the content of the secret's file.
func (s *service) fetch(ctx context.Context, name string) ([]byte, error) {
	body, err := s.expect(ctx, http.StatusOK, http.MethodGet, "/secrets/"+url.PathEscape(name), s.access.token)
	if err != nil {
		return nil, err
	}
	var got map[string]struct {
		Details string `json:"details"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		return nil, fmt.Errorf("GET /secrets/%s: the body is not the expected JSON", name)
	}
	entry, ok := got[name]
	if !ok {
		return nil, fmt.Errorf("GET /secrets/%s: the body has no entry for it", name)
	}
	return base64.StdEncoding.DecodeString(entry.Details)
}

// checkGone verifies that a cancelled agreement left nothing for the
// service: its mount directory is gone and its credentials no longer work.
func (s *service) checkGone(ctx context.Context, mount string) error {
	if _, err := os.Stat(mount); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("the instance's directory is still there after the cancel (%v)", err)
	}
	if _, err := s.expect(ctx, http.StatusUnauthorized, http.MethodGet, "/secrets", s.access.token); err != nil {
		return fmt.Errorf("after the cancel: %w", err)
	}
	s.say.sayf("service", "its mount directory is gone and GET /secrets -> 401: the instance no longer exists")
	return nil
}

// check compares a secret file's content with what the admin last wrote,
// in the layout agentapi documents (raw: the one value's bytes; JSON: an
// object of string values). It never says what either value was.
func (s *demoSecret) check(content []byte) error {
	var got edgesecrets.Data
	if s.format == agreement.FormatRaw {
		keys := s.data.Keys()
		got = edgesecrets.Data{keys[0]: content}
	} else {
		var fields map[string]string
		if err := json.Unmarshal(content, &fields); err != nil {
			return fmt.Errorf("secret %s: the file is not a JSON object of strings", s.service)
		}
		got = edgesecrets.Data{}
		for k, v := range fields {
			got[k] = []byte(v)
		}
	}
	if !got.Equal(s.data) {
		return fmt.Errorf("secret %s: the content differs from what the admin wrote", s.service)
	}
	return nil
}

// describe says what a secret file holds, without its values.
func (s *demoSecret) describe(content []byte) string {
	if s.format == agreement.FormatRaw {
		return fmt.Sprintf("%d raw bytes", len(content))
	}
	return fmt.Sprintf("JSON with keys %s", strings.Join(s.data.Keys(), ", "))
}

func (s *service) close() {
	s.client.CloseIdleConnections()
}
