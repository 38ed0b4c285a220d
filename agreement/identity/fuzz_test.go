package identity

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/edgesecrets/edgesecrets"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every decoder of outside input is fuzzed: it must not panic, must stay
// within its limits, and what it accepts must satisfy its documented rules.

func FuzzParseCSR(f *testing.F) {
	k := newAgentKeys(f)
	valid := k.csr(f, testID)
	f.Add([]byte(valid))
	f.Add([]byte(valid[:len(valid)-40]))
	f.Add([]byte(strings.ReplaceAll(valid, "REQUEST", "")))
	f.Add([]byte("-----BEGIN CERTIFICATE REQUEST-----\nMAA=\n-----END CERTIFICATE REQUEST-----\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		csr, err := parseCSR(in)
		if err != nil {
			require.ErrorIs(t, err, edgesecrets.ErrInvalid)
			require.Less(t, len(err.Error()), 1024)
			return
		}
		require.NoError(t, csr.Identity.Validate())
		require.Len(t, csr.SigningKey, 32)
		require.NotNil(t, csr.EncryptionKey)
		require.LessOrEqual(t, len(in), maxPEMBytes)
	})
}

func FuzzDecodeRegisterRequest(f *testing.F) {
	k := newAgentKeys(f)
	valid, err := registerRequest(f, k, testID, "att-CANARY", now()).Body()
	require.NoError(f, err)
	f.Add(valid)
	f.Add([]byte(`{"provider":"p","org":"o","node":"n","attestation":"x","csr":"y","lifetimeSeconds":-1}`))
	f.Add([]byte(`{"provider":1}`))
	f.Add([]byte(`{"attestation":"att-CANARY","extra":true}`))
	f.Add([]byte(`{} {}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, in []byte) {
		req, err := decodeRegisterBody(bytes.NewReader(in))
		if err != nil {
			require.ErrorIs(t, err, edgesecrets.ErrInvalid)
			require.NotContains(t, err.Error(), "att-CANARY", "errors never quote the attestation")
			return
		}
		require.NotEmpty(t, req.Provider)
		require.NotEmpty(t, req.CSR)
		require.NotEmpty(t, req.Attestation)
		require.LessOrEqual(t, len(req.Attestation), maxAttestationBytes)
		require.GreaterOrEqual(t, req.LifetimeSeconds, int64(0))
	})
}

func FuzzDecodeRefreshRequest(f *testing.F) {
	h := newHub(f)
	k := newAgentKeys(f)
	resp := h.register(f, k, testID)
	validReq := refreshRequest(f, k, testID, resp, now())
	valid, err := json.Marshal(validReq)
	require.NoError(f, err)
	f.Add(valid)
	f.Add([]byte(`{"csr":"a","certificate":"b","signedAt":1,"signature":"AAAA"}`))
	f.Add([]byte(`{"csr":"a","certificate":"b","signedAt":1,"signature":"!!"}`))
	f.Add([]byte(`{"signedAt":"yesterday"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		req, err := decodeRefreshBody(bytes.NewReader(in))
		if err != nil {
			require.ErrorIs(t, err, edgesecrets.ErrInvalid)
			return
		}
		require.Len(t, req.Signature, 64)
		require.NotEmpty(t, req.CSR)
		require.NotEmpty(t, req.Certificate)
		// Whatever decodes, the Issuer answers without panicking, and
		// only the agent's own signature gets through.
		if _, err := h.refresh(context.Background(), testID, req); err == nil {
			require.Equal(t, validReq.Signature, req.Signature)
		}
	})
}

func FuzzParseCertificatesPEM(f *testing.F) {
	h := newHub(f)
	resp := h.register(f, newAgentKeys(f), testID)
	f.Add([]byte(resp.Certificate + resp.CACertificates))
	f.Add([]byte(resp.Certificate))
	f.Add([]byte(strings.Repeat(resp.CACertificates, maxChainCerts+1)))
	f.Fuzz(func(t *testing.T, in []byte) {
		certs, err := parseCertificatesPEM(in)
		if err != nil {
			require.ErrorIs(t, err, edgesecrets.ErrInvalid)
			return
		}
		require.NotEmpty(t, certs)
		require.LessOrEqual(t, len(certs), maxChainCerts)
		// The verifier takes whatever parses without panicking.
		_, _ = h.Verifier().verify(context.Background(), certs...)
	})
}

func FuzzDecodeIdentityResponse(f *testing.F) {
	h := newHub(f)
	resp := h.register(f, newAgentKeys(f), testID)
	valid, err := json.Marshal(resp)
	require.NoError(f, err)
	f.Add(valid)
	f.Add([]byte(`{"certificate":"x","caCertificates":"y","notAfter":"not a time"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := decodeResponseBody(bytes.NewReader(in))
		if err != nil {
			require.ErrorIs(t, err, edgesecrets.ErrInvalid)
			return
		}
		require.NotEmpty(t, out.Certificate)
	})
}

// FuzzHandler sends arbitrary methods, paths and bodies to the HTTP API:
// the answer is always a JSON error or success with a status of the API,
// never a 500.
func FuzzHandler(f *testing.F) {
	h := newHub(f)
	k := newAgentKeys(f)
	registered := h.register(f, k, testID)
	handler := h.Handler(func(r *http.Request, id Identity) error { return ErrUnauthenticated })
	refresh, err := json.Marshal(refreshRequest(f, k, testID, registered, now()))
	require.NoError(f, err)
	register, err := registerRequest(f, k, testID, "good", now()).Body()
	require.NoError(f, err)
	f.Add("POST", "/instance", register)
	f.Add("POST", testID.path(), refresh)
	f.Add("DELETE", testID.path(), []byte(nil))
	f.Add("GET", "/instance/%2e%2e/a/b/c", []byte(nil))
	f.Add("POST", "/instance//a/b/c", []byte("{"))
	allowed := map[int]bool{200: true, 201: true, 204: true, 400: true, 401: true, 403: true, 404: true, 405: true, 409: true, 413: true}
	f.Fuzz(func(t *testing.T, method, path string, body []byte) {
		u, err := url.ParseRequestURI(path)
		if err != nil || method == "" {
			return
		}
		req := (&http.Request{Method: method, URL: u, RequestURI: path, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(body))}).WithContext(context.Background())
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		assert.True(t, allowed[rec.Code], "status %d for %s %q", rec.Code, method, path)
		if rec.Code != http.StatusNoContent {
			assert.True(t, json.Valid(rec.Body.Bytes()), "JSON body")
		}
	})
}

// FuzzResponseError reads arbitrary error answers from the hub: the error
// always has one kind, says the identity is lost only for the reasons
// that say so ("unknown" on a 404, "revoked", "expired"), and quotes at
// most 512 bytes of the hub's message.
func FuzzResponseError(f *testing.F) {
	f.Add(404, []byte(`{"error":"identity: refresh: not found","reason":"unknown"}`))
	f.Add(400, []byte(`{"error":"x","reason":"unknown"}`))
	f.Add(403, []byte(`{"error":"identity: revoked","reason":"revoked"}`))
	f.Add(401, []byte(`{"reason":"expired"}`))
	f.Add(409, []byte(`{"error":"x","reason":"replayed"}`))
	f.Add(500, []byte("not json"))
	f.Add(403, []byte(`{"reason":"revoked","error":5}`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		if status < 100 || status > 999 {
			return
		}
		resp := &http.Response{StatusCode: status, Body: io.NopCloser(bytes.NewReader(body))}
		err := responseError(opRefresh, testID, resp)
		require.Error(t, err)
		require.NotNil(t, kindOf(err), "one kind")
		var b errorBody
		wellFormed := json.Unmarshal(body, &b) == nil
		lost := wellFormed && (b.Reason == reasonRevoked || b.Reason == reasonExpired || (b.Reason == reasonUnknown && status == http.StatusNotFound))
		assert.Equal(t, lost, errors.Is(err, ErrIdentityLost))
		assert.LessOrEqual(t, len(err.Error()), 1024, "the hub's message is clipped")
	})
}
