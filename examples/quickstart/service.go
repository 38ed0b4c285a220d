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

	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/secretstore"
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

	status, _, err := f.service.call(ctx, http.MethodGet, "/secrets", access.token)
	if err != nil {
		return err
	}
	if status != http.StatusNotFound {
		return fmt.Errorf("GET /secrets before any update: status %d, want 404", status)
	}
	f.say.sayf("service", "GET /secrets -> 404: nothing updated since it started")

	status, body, err := f.service.call(ctx, http.MethodGet, "/secrets/"+f.secrets[0].service, f.value())
	if err != nil {
		return err
	}
	if status != http.StatusUnauthorized {
		return fmt.Errorf("GET /secrets/%s with a wrong token: status %d, want 401", f.secrets[0].service, status)
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

	if err := f.service.acknowledge(ctx, s.service); err != nil {
		return err
	}
	f.say.sayf("service", "POST /secrets/%s?received=true -> 201", s.service)
	status, _, err := f.service.call(ctx, http.MethodGet, "/secrets", f.service.access.token)
	if err != nil {
		return err
	}
	if status != http.StatusNotFound {
		return fmt.Errorf("GET /secrets after the acknowledgement: status %d, want 404", status)
	}
	f.say.sayf("service", "GET /secrets -> 404: nothing left to fetch")
	return nil
}

// readFile reads one of the mounted secret files.
func (s *service) readFile(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join(s.mount, name))
}

// call makes one request to the agent's API with the instance's id and the
// given token, and returns the status and body.
func (s *service) call(ctx context.Context, method, path, token string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.api+path, nil)
	if err != nil {
		return 0, nil, err
	}
	req.SetBasicAuth(s.access.instanceID, token)
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, body, err
}

// updated returns GET /secrets: the names updated and not yet acknowledged.
func (s *service) updated(ctx context.Context) ([]string, error) {
	status, body, err := s.call(ctx, http.MethodGet, "/secrets", s.access.token)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("GET /secrets: status %d", status)
	}
	var names []string
	if err := json.Unmarshal(body, &names); err != nil {
		return nil, fmt.Errorf("GET /secrets: %w", err)
	}
	return names, nil
}

// fetch returns GET /secrets/{name}: the content of the secret's file.
func (s *service) fetch(ctx context.Context, name string) ([]byte, error) {
	status, body, err := s.call(ctx, http.MethodGet, "/secrets/"+url.PathEscape(name), s.access.token)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("GET /secrets/%s: status %d", name, status)
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

// acknowledge is POST /secrets/{name}?received=true.
func (s *service) acknowledge(ctx context.Context, name string) error {
	status, _, err := s.call(ctx, http.MethodPost, "/secrets/"+url.PathEscape(name)+"?received=true", s.access.token)
	if err != nil {
		return err
	}
	if status != http.StatusCreated {
		return fmt.Errorf("POST /secrets/%s?received=true: status %d, want 201", name, status)
	}
	return nil
}

// checkGone verifies that a cancelled agreement left nothing for the
// service: its mount directory is gone and its credentials no longer work.
func (s *service) checkGone(ctx context.Context, mount string) error {
	if _, err := os.Stat(mount); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("the instance's directory is still there after the cancel (%v)", err)
	}
	status, _, err := s.call(ctx, http.MethodGet, "/secrets", s.access.token)
	if err != nil {
		return err
	}
	if status != http.StatusUnauthorized {
		return fmt.Errorf("GET /secrets after the cancel: status %d, want 401", status)
	}
	s.say.sayf("service", "its mount directory is gone and GET /secrets -> 401: the instance no longer exists")
	return nil
}

// check compares a secret file's content with what the admin last wrote,
// in the layout agentapi documents (raw: the one value's bytes; JSON: an
// object of string values). It never says what either value was.
func (s *demoSecret) check(content []byte) error {
	var got secretstore.Data
	if s.format == agreement.FormatRaw {
		keys := s.data.Keys()
		got = secretstore.Data{keys[0]: content}
	} else {
		var fields map[string]string
		if err := json.Unmarshal(content, &fields); err != nil {
			return fmt.Errorf("secret %s: the file is not a JSON object of strings", s.service)
		}
		got = secretstore.Data{}
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
