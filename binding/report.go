package binding

import (
	"fmt"
	"strings"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
)

// Severities of a problem (Problem.Severity), as Open Horizon's CLI prints
// them.
const (
	severityError   = "error"
	severityWarning = "warning"
	severityNote    = "note"
)

// Point is where in Open Horizon's flow a validation runs. Open Horizon
// gives some problems a different severity at each point (see Code);
// Validate follows it.
type Point int

// Validation points.
const (
	// PointDeployCheck: `hzn deploycheck secretbinding` (anax
	// compcheck.SecretBindingCompatible). The zero value.
	PointDeployCheck Point = iota
	// PointPublish: `hzn exchange pattern publish` and `hzn exchange
	// deployment addpolicy` (anax cli/exchange verifySecretBindingFor*).
	PointPublish
	// PointAgreement: the agbot checking a deployment for one node before it
	// proposes an agreement (anax agreementbot ValidateAndExtractSecrets).
	PointAgreement
)

// name returns "deploycheck", "publish" or "agreement", for logs.
func (p Point) name() string {
	switch p {
	case PointDeployCheck:
		return "deploycheck"
	case PointPublish:
		return "publish"
	case PointAgreement:
		return "agreement"
	}
	return fmt.Sprintf("Point(%d)", int(p))
}

// Code identifies the rule a problem breaks. Codes are stable: tools may
// match on them. Each code's severity depends on the validation point, as
// anax decides it there:
//
//	code                                   publish   deploycheck   agreement
//	binding_unused, secret_undeclared,
//	binding_duplicate, node_secret_fallback note      warning       note
//	vault_secret_missing, store_unavailable,
//	store_forbidden                        warning   error         error
//	binding_conflict,
//	secrets_mixed_deployment,
//	secret_format_mismatch                 warning   warning       warning
//	every other code                       error     error         error
//
// A problem of a binding or entry that no service needs (an invalid vault
// name, a missing field) takes binding_unused's severity instead.
type Code string

// Problem codes, one per rule. Severities are those at PointDeployCheck;
// see Code for the other points.
const (
	// CodeFieldMissing: a secretBinding entry lacks serviceOrgid,
	// serviceUrl or bindings, or a binding lacks its service secret or
	// vault secret name. A binding's missing name is an error where the
	// binding is needed; an entry's missing field is reported as
	// CodeBindingUnused is (Open Horizon sees an entry that matches nothing).
	CodeFieldMissing Code = "binding_field_missing"
	// CodeArchInvalid: serviceArch is not "", "*" or an architecture name.
	// The entry matches nothing, so it is reported as CodeBindingUnused is.
	CodeArchInvalid Code = "binding_arch_invalid"
	// CodeVersionRangeInvalid: serviceVersionRange cannot be parsed. An
	// error when the entry's organisation, URL and architecture select a
	// deployed service (anax fails there too); otherwise as CodeBindingUnused.
	CodeVersionRangeInvalid Code = "binding_version_range_invalid"
	// CodeContainerRequired: a secret declared at the top of a service
	// definition (design form) is bound by an entry without
	// serviceContainer, and the service has several containers.
	CodeContainerRequired Code = "container_required"
	// CodeContainerUnknown: serviceContainer names no container of the service.
	CodeContainerUnknown Code = "container_unknown"
	// CodeSecretUndeclared: a binding for a secret the service (or the
	// container serviceContainer names) does not declare. Open Horizon
	// calls it a binding no service requires: a warning at deploycheck, a
	// note elsewhere.
	CodeSecretUndeclared Code = "secret_undeclared"
	// CodeSecretUnbound: a declared secret that no binding binds.
	CodeSecretUnbound Code = "secret_unbound"
	// CodeSecretNameInvalid: a service secret name is not a single safe
	// path element (it becomes a file name). In a binding no service needs,
	// reported as CodeBindingUnused is.
	CodeSecretNameInvalid Code = "secret_name_invalid"
	// CodeSecretFormatInvalid: a declared secret's format is not "json",
	// "value_only" or "raw".
	CodeSecretFormatInvalid Code = "secret_format_invalid"
	// CodeVaultSecretInvalid: a vault secret name breaks the naming rules.
	// In a binding no service needs, reported as CodeBindingUnused is.
	CodeVaultSecretInvalid Code = "vault_secret_invalid"
	// CodeVaultSecretMissing: the vault secret does not exist (with
	// enableNodeLevelSecrets: neither the node-level nor the other one).
	// A warning at PointPublish.
	CodeVaultSecretMissing Code = "vault_secret_missing"
	// CodeNodeSecretFallback: with enableNodeLevelSecrets, the node-level
	// secret does not exist for the node and the organisation- or
	// user-level one is used. A warning at deploycheck, a note at the
	// agreement.
	CodeNodeSecretFallback Code = "node_secret_fallback"
	// CodeStoreUnavailable: existence could not be checked because the
	// store (or the agbot API) is absent or unavailable. A warning at
	// PointPublish.
	CodeStoreUnavailable Code = "store_unavailable"
	// CodeStoreForbidden: the store refused the existence check. A warning
	// at PointPublish.
	CodeStoreForbidden Code = "store_forbidden"
	// CodeBindingConflict: one service secret (of one container) is bound
	// to different vault secrets; the first binding in document order
	// applies, as in Open Horizon. Warning.
	CodeBindingConflict Code = "binding_conflict"
	// CodeBindingDuplicate: one service secret is bound twice to the same
	// vault secret. As CodeBindingUnused.
	CodeBindingDuplicate Code = "binding_duplicate"
	// CodeBindingUnused: a secretBinding entry matches no service of the
	// deployment. A warning at deploycheck, a note elsewhere.
	CodeBindingUnused Code = "binding_unused"
	// CodeSecretsClusterOnly: a service with only a cluster deployment
	// declares secrets at the top of its definition (design form); declare
	// them in clusterDeployment.secrets.
	CodeSecretsClusterOnly Code = "secrets_cluster_only"
	// CodeSecretsMixedDeployment: a service with device and cluster
	// deployments declares secrets at the top of its definition (design
	// form); only its device containers get them. Warning.
	CodeSecretsMixedDeployment Code = "secrets_mixed_deployment"
	// CodeSecretFormatMismatch: the vault secret's content cannot be
	// rendered in the format the service declares for it
	// (agreement.ContentKey): a "raw" secret with several keys other than
	// Open Horizon's "key" and "value", a "value_only" secret without a
	// "value". Checked only with Options.CheckFormats and a Checker that
	// implements KeyChecker (NewStoreChecker's does). A warning: the content may be rewritten;
	// until it is, the agbot's delivery engine holds the agreement back
	// with the reason delivery.ReasonFormatUnrenderable.
	CodeSecretFormatMismatch Code = "secret_format_mismatch"
	// CodeServiceUnresolved: a deployed service or a dependency could not
	// be found (or its version constraint is invalid).
	CodeServiceUnresolved Code = "service_unresolved"
)

// severityAt returns the code's severity at validation point p (see Code).
func (c Code) severityAt(p Point) string {
	switch c {
	case CodeBindingUnused, CodeSecretUndeclared, CodeBindingDuplicate, CodeNodeSecretFallback:
		if p == PointDeployCheck {
			return severityWarning
		}
		return severityNote
	case CodeVaultSecretMissing, CodeStoreUnavailable, CodeStoreForbidden:
		if p == PointPublish {
			return severityWarning
		}
		return severityError
	case CodeBindingConflict, CodeSecretsMixedDeployment, CodeSecretFormatMismatch:
		return severityWarning
	}
	return severityError
}

// Problem is one finding of a validation.
type Problem struct {
	Code Code `json:"code"`
	// Severity is "error" (the deployment or publication must not
	// proceed), "warning" (worth telling the user; does not block) or
	// "note" (for information), as Open Horizon's CLI prints them; it
	// depends on the code and on Options.Point (see Code).
	Severity string `json:"severity"`
	// Service is the service concerned (org/url/arch/version, and the
	// container when known). For a problem of a secretBinding entry on its
	// own it holds the entry's serviceOrgid, serviceUrl, serviceArch and
	// serviceContainer, with Version holding its serviceVersionRange.
	Service agreement.ServiceRef `json:"service"`
	// Binding is the 1-based position of the secretBinding entry concerned,
	// or 0 when the problem is not about an entry.
	Binding int `json:"binding,omitempty"`
	// ServiceSecret is the service secret name concerned, if any.
	ServiceSecret string `json:"serviceSecret,omitempty"`
	// VaultSecret is the vault secret name concerned, if any.
	VaultSecret string `json:"vaultSecret,omitempty"`
	// Message is one sentence saying what is wrong.
	Message string `json:"message"`
}

// String returns "<severity> <code>: <message>".
func (p Problem) String() string {
	return p.Severity + " " + string(p.Code) + ": " + p.Message
}

// ResolvedBinding is a binding Validate found to apply: the service
// (container) receives the vault secret under the service secret name.
type ResolvedBinding struct {
	// Service includes the container the secret is mounted into; an empty
	// Container is the service's cluster deployment.
	Service       agreement.ServiceRef `json:"service"`
	ServiceSecret string               `json:"serviceSecret"`
	// Format is the declared format (agreement.FormatJSON when not declared).
	Format      string          `json:"format"`
	VaultSecret VaultSecretName `json:"vaultSecret"`
	// NodeLevel is the entry's enableNodeLevelSecrets: the binding resolves
	// per node (see Report.Bindings).
	NodeLevel bool `json:"enableNodeLevelSecrets,omitempty"`
	// Binding is the 1-based position of the secretBinding entry.
	Binding int `json:"binding"`
}

// Report is the result of a validation: every problem found, the services
// visited, and the bindings that apply.
type Report struct {
	Problems []Problem `json:"problems"`
	// Services lists every service version visited (the top-level ones and
	// their whole dependency trees), in visiting order.
	Services []agreement.ServiceRef `json:"services,omitempty"`
	// Resolved lists the bindings that apply, with valid vault secret names.
	// The agbot resolves them per node (Bindings) and registers them with
	// its delivery engine.
	Resolved []ResolvedBinding `json:"resolved,omitempty"`
	// ExistenceChecked is false when no ExistenceChecker was given, so
	// missing vault secrets were not looked for.
	ExistenceChecked bool `json:"existenceChecked"`
}

// Errors returns the problems of severity "error"; the report is clean
// (deployable, publishable) when there are none.
func (r *Report) Errors() []Problem { return r.bySeverity(severityError) }

// Warnings returns the problems of severity "warning".
func (r *Report) Warnings() []Problem { return r.bySeverity(severityWarning) }

func (r *Report) bySeverity(s string) []Problem {
	var out []Problem
	for _, p := range r.Problems {
		if p.Severity == s {
			out = append(out, p)
		}
	}
	return out
}

// Err returns nil when the report has no errors, and otherwise an error
// listing them, one per line; it matches edgesecrets.ErrInvalid.
func (r *Report) Err() error {
	if errs := r.Errors(); len(errs) > 0 {
		return &validationError{problems: errs}
	}
	return nil
}

// validationError lists the errors of a report.
type validationError struct {
	problems []Problem
}

// Error lists the problems, one per line.
func (e *validationError) Error() string {
	if len(e.problems) == 1 {
		return "binding: " + e.problems[0].String()
	}
	lines := make([]string, len(e.problems))
	for i, p := range e.problems {
		lines[i] = p.String()
	}
	return fmt.Sprintf("binding: %d problems:\n  - %s", len(e.problems), strings.Join(lines, "\n  - "))
}

// Unwrap returns edgesecrets.ErrInvalid.
func (e *validationError) Unwrap() error { return edgesecrets.ErrInvalid }

// add appends a problem of code c with its severity at point and a
// message built from format, and returns its index in r.Problems.
func (r *Report) add(at Point, c Code, p Problem, format string, args ...any) int {
	p.Code, p.Severity, p.Message = c, c.severityAt(at), fmt.Sprintf(format, args...)
	r.Problems = append(r.Problems, p)
	return len(r.Problems) - 1
}
