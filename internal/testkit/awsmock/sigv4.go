package awsmock

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// signingService is the SigV4 service name requests must be scoped to.
const signingService = "secretsmanager"

// sigV4Auth is a parsed "AWS4-HMAC-SHA256 Credential=..., SignedHeaders=...,
// Signature=..." Authorization header.
type sigV4Auth struct {
	accessKey, date, region, service string
	signedHeaders                    []string
	signature                        string
}

// parseSigV4 parses an Authorization header, returning the AWS error a
// malformed one earns.
func parseSigV4(header string) (sigV4Auth, *apiError) {
	rest, ok := strings.CutPrefix(header, "AWS4-HMAC-SHA256 ")
	if !ok {
		return sigV4Auth{}, clientError("IncompleteSignatureException", "Authorization header must use the AWS4-HMAC-SHA256 algorithm.")
	}
	var a sigV4Auth
	var credential, signed string
	for part := range strings.SplitSeq(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			credential = v
		case "SignedHeaders":
			signed = v
		case "Signature":
			a.signature = v
		}
	}
	scope := strings.Split(credential, "/")
	if len(scope) != 5 || scope[0] == "" || len(scope[1]) != 8 || scope[2] == "" || scope[4] != "aws4_request" {
		return sigV4Auth{}, clientError("IncompleteSignatureException", "Authorization header requires a Credential of the form <key>/<date>/<region>/<service>/aws4_request.")
	}
	a.accessKey, a.date, a.region, a.service = scope[0], scope[1], scope[2], scope[3]
	if signed == "" {
		return sigV4Auth{}, clientError("IncompleteSignatureException", "Authorization header requires a SignedHeaders parameter.")
	}
	a.signedHeaders = strings.Split(signed, ";")
	if len(a.signature) != 64 {
		return sigV4Auth{}, clientError("IncompleteSignatureException", "Authorization header requires a 64-digit hex Signature.")
	}
	if _, err := hex.DecodeString(a.signature); err != nil {
		return sigV4Auth{}, clientError("IncompleteSignatureException", "Authorization header requires a 64-digit hex Signature.")
	}
	return a, nil
}

// authenticate checks that r carries a SigV4 signature for Secrets Manager
// and, when the server knows credentials, that the signature is right.
func (s *Server) authenticate(r *http.Request, body []byte) *apiError {
	header := r.Header.Get("Authorization")
	if header == "" {
		return clientError("MissingAuthenticationTokenException", "Missing Authentication Token")
	}
	a, aerr := parseSigV4(header)
	if aerr != nil {
		return aerr
	}
	if a.service != signingService {
		return clientError("InvalidSignatureException", "Credential should be scoped to correct service: '%s'.", signingService)
	}
	for _, h := range []string{"host", "x-amz-date"} {
		found := false
		for _, sh := range a.signedHeaders {
			found = found || sh == h
		}
		if !found {
			return clientError("IncompleteSignatureException", "SignedHeaders must include %s.", h)
		}
	}
	signedAt, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil || signedAt.Format("20060102") != a.date {
		return clientError("IncompleteSignatureException", "X-Amz-Date must be a basic ISO 8601 time on the credential's date.")
	}
	if s.creds == nil {
		return nil
	}
	secretKey, ok := s.creds[a.accessKey]
	if !ok {
		return clientError("UnrecognizedClientException", "The security token included in the request is invalid.")
	}
	if !verifySignature(r, body, a, signedAt, aws.Credentials{
		AccessKeyID: a.accessKey, SecretAccessKey: secretKey, SessionToken: r.Header.Get("X-Amz-Security-Token"),
	}) {
		return clientError("InvalidSignatureException", "The request signature we calculated does not match the signature you provided.")
	}
	return nil
}

// verifySignature signs a copy of r holding only the signed headers and
// compares the result with the signature r carries.
func verifySignature(r *http.Request, body []byte, a sigV4Auth, signedAt time.Time, creds aws.Credentials) bool {
	u := *r.URL
	u.Scheme, u.Host = "http", r.Host
	cp, err := http.NewRequest(r.Method, u.String(), io.NopCloser(bytes.NewReader(body)))
	if err != nil {
		return false
	}
	cp.Host = r.Host
	cp.ContentLength = r.ContentLength
	for _, h := range a.signedHeaders {
		switch h {
		case "host", "content-length":
			continue
		}
		if vs := r.Header.Values(h); len(vs) > 0 {
			cp.Header[http.CanonicalHeaderKey(h)] = vs
		}
	}
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, cp, hex.EncodeToString(sum[:]), signingService, a.region, signedAt); err != nil {
		return false
	}
	got, perr := parseSigV4(cp.Header.Get("Authorization"))
	if perr != nil {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(got.signature), []byte(a.signature)) == 1
}
