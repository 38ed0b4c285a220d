package demo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/edgesecrets/edgesecrets/internal/jsonproblem"
)

// maxEnvSize bounds an environment file.
const maxEnvSize = 64 << 10

// Env is what the example agent hands a service instance, in a file the
// service reads. It stands in for the environment variables and the
// read-only bind mount at /open-horizon-secrets that a real agent gives
// the container: where the /secrets API is, the instance's HTTP Basic
// credentials, and the directory its secret files are in.
//
// Printing an Env (fmt, slog) leaves the token out.
type Env struct {
	// API is the base URL of the agent's /secrets API.
	API string `json:"api"`
	// Instance is the service instance id, the HTTP Basic user id.
	Instance string `json:"instance"`
	// Token is the instance's HTTP Basic password.
	Token string `json:"token"`
	// Mount is the directory holding the instance's secret files (what
	// the container would see at /open-horizon-secrets).
	Mount string `json:"mount"`
}

// Format prints the Env without its token, for every verb.
func (e Env) Format(f fmt.State, _ rune) {
	// fmt.State writes to the caller's buffer; a failing writer is the
	// caller's Fprintf's error to report.
	_, _ = fmt.Fprintf(f, "{API:%s Instance:%s Token:[redacted] Mount:%s}", e.API, e.Instance, e.Mount)
}

// LogValue logs the Env without its token.
func (e Env) LogValue() slog.Value {
	return slog.GroupValue(slog.String("api", e.API), slog.String("instance", e.Instance), slog.String("mount", e.Mount))
}

// envFile is the form of an environment file: Env's fields, the token
// included.
type envFile Env

// MarshalJSON encodes the Env with its token redacted, so a value holding
// one can be logged through slog's JSON handler; WriteEnv writes the token.
func (e Env) MarshalJSON() ([]byte, error) {
	e.Token = "[redacted]"
	return json.Marshal(envFile(e))
}

// Validate checks that every field is set.
func (e Env) Validate() error {
	var problems []error
	for _, f := range []struct{ name, value string }{{"api", e.API}, {"instance", e.Instance}, {"token", e.Token}, {"mount", e.Mount}} {
		if f.value == "" {
			problems = append(problems, fmt.Errorf("%q is missing", f.name))
		}
	}
	return errors.Join(problems...)
}

// WriteEnv writes e to path atomically, mode 0600 (it holds a token).
func WriteEnv(path string, e Env) error {
	if err := e.Validate(); err != nil {
		return fmt.Errorf("environment file %s: %w", path, err)
	}
	b, err := EncodeEnv(e)
	if err != nil {
		return err
	}
	return WritePrivateFile(path, append(b, '\n'))
}

// EncodeEnv returns the content of an environment file, token included
// (json.Marshal redacts the token).
func EncodeEnv(e Env) ([]byte, error) { return json.Marshal(envFile(e)) }

// ReadEnv reads an environment file written by WriteEnv.
func ReadEnv(path string) (Env, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Env{}, err
	}
	return DecodeEnv(b)
}

// DecodeEnv decodes the content of an environment file strictly. Errors
// never quote the content.
func DecodeEnv(b []byte) (Env, error) {
	var e Env
	if err := jsonproblem.Decode(bytes.NewReader(b), maxEnvSize, &e); err != nil {
		return Env{}, fmt.Errorf("environment file: %w", err)
	}
	if err := e.Validate(); err != nil {
		return Env{}, fmt.Errorf("environment file: %w", err)
	}
	return e, nil
}
