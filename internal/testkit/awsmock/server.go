package awsmock

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Operation names, as they appear after "secretsmanager." in X-Amz-Target.
const (
	OpCreateSecret             = "CreateSecret"
	OpGetSecretValue           = "GetSecretValue"
	OpBatchGetSecretValue      = "BatchGetSecretValue"
	OpPutSecretValue           = "PutSecretValue"
	OpDescribeSecret           = "DescribeSecret"
	OpListSecrets              = "ListSecrets"
	OpDeleteSecret             = "DeleteSecret"
	OpRestoreSecret            = "RestoreSecret"
	OpTagResource              = "TagResource"
	OpUntagResource            = "UntagResource"
	OpUpdateSecretVersionStage = "UpdateSecretVersionStage"
)

// Operations lists every operation the endpoint serves.
func Operations() []string {
	return []string{
		OpBatchGetSecretValue, OpCreateSecret, OpDeleteSecret, OpDescribeSecret,
		OpGetSecretValue, OpListSecrets, OpPutSecretValue, OpRestoreSecret,
		OpTagResource, OpUntagResource, OpUpdateSecretVersionStage,
	}
}

// IsWrite reports whether op changes state: the operations Writes counts.
func IsWrite(op string) bool {
	switch op {
	case OpCreateSecret, OpPutSecretValue, OpDeleteSecret, OpRestoreSecret,
		OpTagResource, OpUntagResource, OpUpdateSecretVersionStage:
		return true
	}
	return false
}

// Limits the endpoint enforces, as AWS documents them.
const (
	// MaxSecretStringBytes is the largest SecretString or SecretBinary.
	MaxSecretStringBytes = 65536
	// MaxNameLength is the longest secret name.
	MaxNameLength = 512
	// MaxTags is the most tags a secret can carry.
	MaxTags = 50
	// MaxBatchSecrets is the most ids (and the largest MaxResults) of one
	// BatchGetSecretValue.
	MaxBatchSecrets = 20
	// MaxListResults is the largest MaxResults of ListSecrets.
	MaxListResults = 100
	// MaxVersions is how many versions a secret keeps; beyond it the oldest
	// versions without staging labels are removed.
	MaxVersions = 100
	// MaxRequestBytes bounds a request body.
	MaxRequestBytes = 256 << 10
)

// Staging labels Secrets Manager manages itself.
const (
	StageCurrent  = "AWSCURRENT"
	StagePrevious = "AWSPREVIOUS"
)

// Options configure a Server. The zero value is usable.
type Options struct {
	// Region and AccountID appear in ARNs. Defaults: "us-east-1",
	// "123456789012".
	Region    string
	AccountID string
	// Now replaces time.Now: for CreatedDate/LastChangedDate stamps and for
	// ending recovery windows. Advance it past a DeletionDate and the secret
	// is purged on the next request.
	Now func() time.Time
	// Credentials, when set, maps access key ids to secret access keys and
	// makes the endpoint verify every request's SigV4 signature: an unknown
	// key is UnrecognizedClientException, a wrong signature
	// InvalidSignatureException. When nil, only the form of the
	// Authorization header and its credential scope are checked.
	Credentials map[string]string
	// DefaultPageSize is the page size of ListSecrets and filtered
	// BatchGetSecretValue calls that give no MaxResults. Default 100.
	DefaultPageSize int
}

// Fault makes matching requests fail, for testing a client's error handling
// and retries.
type Fault struct {
	// Op is the operation to fail; empty fails every operation.
	Op string
	// SecretID, when set, limits the fault to requests whose SecretId
	// member names this secret (by name or ARN), as a resource policy
	// denying one secret would: ListSecrets and BatchGetSecretValue, which
	// name no single secret, never match.
	SecretID string
	// Code is the AWS error code returned, for example
	// "AccessDeniedException" or "InternalServiceError". Default
	// "InternalServiceError".
	Code string
	// Status is the HTTP status. Default 500 for InternalServiceError and
	// ServiceUnavailable, 400 otherwise (as AWS answers throttling).
	Status int
	// Count is how many matching requests fail; zero fails all until
	// ClearFaults.
	Count int
	// AfterApply performs the operation before failing the request, as when
	// a response is lost on its way back. Retries then meet their own
	// earlier effect (idempotency tests).
	AfterApply bool
}

// Server is a Secrets Manager endpoint speaking the AWS JSON 1.1 protocol.
// It is an http.Handler; serve it with httptest.NewServer and point an AWS
// SDK client's BaseEndpoint at it. It is safe for concurrent use.
type Server struct {
	region, account string
	now             func() time.Time
	creds           map[string]string
	pageSize        int

	mu         sync.Mutex
	secrets    map[string]*secret // by name, including those pending deletion
	seq        int64              // orders secrets and versions by creation
	throttling bool
	faults     []*Fault
	calls      map[string]int64
	writes     int64
}

// New returns an empty endpoint.
func New(opts Options) *Server {
	s := &Server{
		region:   opts.Region,
		account:  opts.AccountID,
		now:      opts.Now,
		creds:    maps.Clone(opts.Credentials),
		pageSize: opts.DefaultPageSize,
		secrets:  map[string]*secret{},
		calls:    map[string]int64{},
	}
	if s.region == "" {
		s.region = "us-east-1"
	}
	if s.account == "" {
		s.account = "123456789012"
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.pageSize <= 0 || s.pageSize > MaxListResults {
		s.pageSize = MaxListResults
	}
	return s
}

// SetThrottling turns throttling on or off. While on, every request is
// answered with HTTP 400 ThrottlingException ("Rate exceeded") without
// touching state, as AWS does when a request quota is exceeded.
func (s *Server) SetThrottling(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.throttling = on
}

// InjectFault adds a fault. Faults are checked in the order they were added;
// the first that matches a request answers it.
func (s *Server) InjectFault(f Fault) {
	if f.Code == "" {
		f.Code = "InternalServiceError"
	}
	if f.Status == 0 {
		f.Status = http.StatusBadRequest
		if f.Code == "InternalServiceError" || f.Code == "ServiceUnavailable" {
			f.Status = http.StatusInternalServerError
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &f)
}

// ClearFaults removes every fault and turns throttling off.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
	s.throttling = false
}

// Calls returns how many requests named op (valid target, any outcome,
// including throttled and faulted ones) the endpoint received.
func (s *Server) Calls(op string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[op]
}

// AllCalls returns the request count of every operation called so far.
func (s *Server) AllCalls() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.calls)
}

// Writes returns how many requests for write operations (see IsWrite) the
// endpoint received, whatever their outcome.
func (s *Server) Writes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes
}

// ResetCounters zeroes Calls and Writes.
func (s *Server) ResetCounters() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = map[string]int64{}
	s.writes = 0
}

// SecretInfo describes a stored secret, without its values.
type SecretInfo struct {
	Name        string
	ARN         string
	Description string
	KMSKeyID    string
	Tags        map[string]string
	CreatedDate time.Time
	// DeletedDate is when deletion was requested and DeletionDate when the
	// secret will be purged; both zero unless the secret is pending deletion.
	DeletedDate  time.Time
	DeletionDate time.Time
	// Versions lists every version kept, oldest first, including deprecated
	// ones (no staging labels).
	Versions []VersionInfo
}

// VersionInfo describes one version of a secret, without its value.
type VersionInfo struct {
	ID          string
	Stages      []string
	CreatedDate time.Time
}

// Current returns the version holding AWSCURRENT, and false if none does.
func (si SecretInfo) Current() (VersionInfo, bool) {
	for _, v := range si.Versions {
		if slices.Contains(v.Stages, StageCurrent) {
			return v, true
		}
	}
	return VersionInfo{}, false
}

// Secret returns what the endpoint holds under name (pending deletion
// included), and false if it holds nothing.
func (s *Server) Secret(name string) (SecretInfo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.purge()
	sec, ok := s.secrets[name]
	if !ok {
		return SecretInfo{}, false
	}
	info := SecretInfo{
		Name: sec.name, ARN: sec.arn, Description: sec.description, KMSKeyID: sec.kmsKeyID,
		Tags: map[string]string{}, CreatedDate: sec.created,
		DeletedDate: sec.deleted, DeletionDate: sec.deletionDate,
	}
	for _, t := range sec.tags {
		info.Tags[t.key] = t.value
	}
	for _, v := range sec.versions {
		info.Versions = append(info.Versions, VersionInfo{ID: v.id, Stages: slices.Clone(v.stages), CreatedDate: v.created})
	}
	return info, true
}

// Names returns the names of every secret held, pending deletion included,
// sorted.
func (s *Server) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.purge()
	return slices.Sorted(maps.Keys(s.secrets))
}

// ServeHTTP implements http.Handler: one Secrets Manager API call per POST.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reqID := newID()
	w.Header().Set("X-Amzn-Requestid", reqID)
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, &apiError{status: http.StatusMethodNotAllowed, code: "MethodNotAllowedException", message: "use POST"})
		return
	}
	op, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), "secretsmanager.")
	if !ok || !slices.Contains(Operations(), op) {
		writeError(w, &apiError{status: http.StatusBadRequest, code: "UnknownOperationException", message: "unknown or missing X-Amz-Target"})
		return
	}
	s.count(op)
	if ct := r.Header.Get("Content-Type"); ct != "application/x-amz-json-1.1" {
		writeError(w, errSerialization("Content-Type must be application/x-amz-json-1.1"))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxRequestBytes+1))
	if err != nil {
		writeError(w, errSerialization("request body could not be read"))
		return
	}
	if len(body) > MaxRequestBytes {
		writeError(w, &apiError{status: http.StatusRequestEntityTooLarge, code: "RequestEntityTooLargeException", message: fmt.Sprintf("request body is larger than %d bytes", MaxRequestBytes)})
		return
	}
	if aerr := s.authenticate(r, body); aerr != nil {
		writeError(w, aerr)
		return
	}
	out, aerr := s.call(op, body)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_ = json.NewEncoder(w).Encode(out)
}

func (s *Server) call(op string, body []byte) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.throttling {
		return nil, &apiError{status: http.StatusBadRequest, code: "ThrottlingException", message: "Rate exceeded"}
	}
	fault := s.takeFault(op, body)
	if fault != nil && !fault.AfterApply {
		return nil, faultError(fault)
	}
	s.purge()
	out, aerr := s.dispatch(op, body)
	if fault != nil && aerr == nil {
		return nil, faultError(fault)
	}
	return out, aerr
}

func (s *Server) count(op string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[op]++
	if IsWrite(op) {
		s.writes++
	}
}

// takeFault returns the first fault matching op and body and uses up one
// of its counts. s.mu must be held.
func (s *Server) takeFault(op string, body []byte) *Fault {
	for i, f := range s.faults {
		if f.Op != "" && f.Op != op {
			continue
		}
		if f.SecretID != "" && !s.names(body, f.SecretID) {
			continue
		}
		hit := *f
		if f.Count > 0 {
			if f.Count--; f.Count == 0 {
				s.faults = slices.Delete(s.faults, i, i+1)
			}
		}
		return &hit
	}
	return nil
}

// names reports whether the request body's SecretId member names the
// secret name (by name or ARN). s.mu must be held.
func (s *Server) names(body []byte, name string) bool {
	var in struct{ SecretId *string }
	if json.Unmarshal(body, &in) != nil || in.SecretId == nil {
		return false
	}
	id := *in.SecretId
	if id == name {
		return true
	}
	sec := s.find(id)
	return sec != nil && sec.name == name
}

func faultError(f *Fault) *apiError {
	return &apiError{status: f.Status, code: f.Code, message: "injected fault"}
}

// dispatch decodes the body for op and runs it. s.mu must be held.
func (s *Server) dispatch(op string, body []byte) (any, *apiError) {
	switch op {
	case OpCreateSecret:
		return run(body, s.createSecret)
	case OpGetSecretValue:
		return run(body, s.getSecretValue)
	case OpBatchGetSecretValue:
		return run(body, s.batchGetSecretValue)
	case OpPutSecretValue:
		return run(body, s.putSecretValue)
	case OpDescribeSecret:
		return run(body, s.describeSecret)
	case OpListSecrets:
		return run(body, s.listSecrets)
	case OpDeleteSecret:
		return run(body, s.deleteSecret)
	case OpRestoreSecret:
		return run(body, s.restoreSecret)
	case OpTagResource:
		return run(body, s.tagResource)
	case OpUntagResource:
		return run(body, s.untagResource)
	case OpUpdateSecretVersionStage:
		return run(body, s.updateSecretVersionStage)
	}
	return nil, &apiError{status: http.StatusBadRequest, code: "UnknownOperationException", message: "unknown operation"}
}

func run[In, Out any](body []byte, fn func(*In) (Out, *apiError)) (any, *apiError) {
	in := new(In)
	if err := decodeInput(body, in); err != nil {
		return nil, err
	}
	out, err := fn(in)
	if err != nil {
		return nil, err
	}
	return out, nil
}

type apiError struct {
	status  int
	code    string
	message string
}

func writeError(w http.ResponseWriter, e *apiError) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-Errortype", e.code)
	w.WriteHeader(e.status)
	_ = json.NewEncoder(w).Encode(errorBody{Type: e.code, Message: e.message})
}

func clientError(code, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, code: code, message: fmt.Sprintf(format, args...)}
}

func errSerialization(msg string) *apiError {
	return clientError("SerializationException", "%s", msg)
}

func errValidation(format string, args ...any) *apiError {
	return clientError("ValidationException", format, args...)
}

func errInvalidParameter(format string, args ...any) *apiError {
	return clientError("InvalidParameterException", format, args...)
}

func errNotFound() *apiError {
	return clientError("ResourceNotFoundException", "Secrets Manager can't find the specified secret.")
}

func errMarkedForDeletion() *apiError {
	return clientError("InvalidRequestException", "You can't perform this operation on the secret because it was marked for deletion.")
}

// newID returns a random UUID (version 4) string.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// arnSuffix returns the six random characters AWS appends to a secret's ARN.
func arnSuffix() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	var b [6]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b[:])
}
