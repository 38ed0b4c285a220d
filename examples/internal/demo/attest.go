package demo

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/edgesecrets/edgesecrets/agreement/identity"
)

// attestationPrefix starts every demo attestation document.
const attestationPrefix = "demo1."

// Attest makes the demo attestation document for id at time now: an
// HMAC-SHA256, keyed with a bootstrap token the agbot and the agent share,
// over the instance and the time. It is bound to one instance and dated,
// so the hub's freshness window applies, but anyone holding the token can
// vouch for any instance: it stands in for a provider's signed instance
// identity document, and is for demonstrations only.
func Attest(bootstrapToken string, id identity.Identity, now time.Time) identity.Attestation {
	unix := strconv.FormatInt(now.Unix(), 10)
	return identity.Attestation(attestationPrefix + unix + "." + attestationMAC(bootstrapToken, id, unix))
}

// NewAttestor returns the hub's attestor (identity.IssuerOptions.Attest)
// for documents made by Attest with the same bootstrap token. Its errors
// never quote the document.
func NewAttestor(bootstrapToken string) func(context.Context, identity.AttestationRequest) (time.Time, error) {
	return func(_ context.Context, req identity.AttestationRequest) (time.Time, error) {
		rest, ok := strings.CutPrefix(string(req.Attestation), attestationPrefix)
		if !ok {
			return time.Time{}, errors.New("demo attestor: not a demo attestation document")
		}
		unix, mac, ok := strings.Cut(rest, ".")
		if !ok {
			return time.Time{}, errors.New("demo attestor: malformed document")
		}
		secs, err := strconv.ParseInt(unix, 10, 64)
		if err != nil {
			return time.Time{}, errors.New("demo attestor: malformed time")
		}
		want := attestationMAC(bootstrapToken, req.Instance, unix)
		if !hmac.Equal([]byte(mac), []byte(want)) {
			return time.Time{}, errors.New("demo attestor: document not made with the bootstrap token for this instance")
		}
		return time.Unix(secs, 0), nil
	}
}

func attestationMAC(token string, id identity.Identity, unix string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("edgesecrets demo attestation\n" + id.String() + "\n" + unix))
	return hex.EncodeToString(m.Sum(nil))
}
