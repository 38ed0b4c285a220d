package agreement

import (
	"context"
	"errors"
	"fmt"

	"github.com/edgesecrets/edgesecrets/secretstore"
)

// ReadProposal reads the store secrets bound to an agreement's services
// and returns the agreement's proposal carrying them, together with a copy
// of services in which each BoundSecret's Sent is the content tag of what
// the proposal carries: what Tracker.Register takes, so that the agent is
// sent an update whenever the store holds other content, also for a
// rotation between this read and the watcher's first look.
//
// Each distinct store secret is read once, with one GetBatch call: give
// it the agbot's *secretstore.Reader (a *secretstore.Store works too) so
// that agreements over the same secrets share reads. services is not
// modified.
//
// Errors: bindings that Register would refuse match secretstore.ErrInvalid
// and nothing is read. Store secrets that do not exist (deleted since the
// validation) give an error holding one *secretstore.Error of kind
// secretstore.ErrNotFound per missing secret, naming it, so the agbot can
// wait for them (Tracker.Refused). A store secret whose content does not
// fit its format (FormatRaw needs exactly one key) matches
// ErrInvalidMessage. Any other read error is returned as the store gave it.
// No error contains a secret value.
func ReadProposal(ctx context.Context, store interface {
	GetBatch(ctx context.Context, names []string) (map[string]*secretstore.Secret, error)
}, agreementID string, services []ServiceBinding) (Proposal, []ServiceBinding, error) {
	if err := checkBindings(agreementID, services); err != nil {
		return Proposal{}, nil, fmt.Errorf("agreement: proposal: %w: %w", secretstore.ErrInvalid, err)
	}
	names := vaultSecrets(services)
	values, err := store.GetBatch(ctx, names)
	if err != nil {
		return Proposal{}, nil, fmt.Errorf("agreement: reading the secrets of agreement %q: %w", agreementID, err)
	}
	var missing []error
	for _, n := range names {
		if values[n] == nil {
			missing = append(missing, secretstore.NewError(secretstore.OpGet, n, secretstore.ErrNotFound, nil))
		}
	}
	if len(missing) > 0 {
		return Proposal{}, nil, fmt.Errorf("agreement: reading the secrets of agreement %q: %w", agreementID, errors.Join(missing...))
	}

	p := Proposal{Version: MessageVersion, AgreementID: agreementID, Services: make([]ServiceSecrets, 0, len(services))}
	sent := make([]ServiceBinding, 0, len(services))
	for _, sb := range services {
		details := make(map[string]SecretDetails, len(sb.Secrets))
		tagged := make(map[string]BoundSecret, len(sb.Secrets))
		for name, b := range sb.Secrets {
			s := values[b.VaultSecret]
			details[name] = SecretDetails{Format: b.Format, Data: s.Data}
			b.Sent = s.ContentTag()
			tagged[name] = b
		}
		p.Services = append(p.Services, ServiceSecrets{Service: sb.Service, Secrets: details})
		sent = append(sent, ServiceBinding{Service: sb.Service, Secrets: tagged})
	}
	if err := p.Validate(); err != nil {
		return Proposal{}, nil, err
	}
	return p, sent, nil
}
