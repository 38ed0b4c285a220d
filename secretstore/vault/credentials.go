package vault

import (
	"context"
	"errors"
	"fmt"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// CheckCredentials implements driver.CredentialChecker: it asks Vault
// about the store's own token (auth/token/lookup-self, which every token
// may read through the default policy) and adds what the store knows
// itself. It returns nil when Vault accepts the token. A token Vault
// refuses is first replaced by a fresh login when the store can log in
// again, as for any request; when that is impossible or fails, the error
// matches edgesecrets.ErrPermission and says why, naming where the token
// came from, never the token: a token given by value or environment
// variable that reached its max TTL can never be renewed or replaced; a
// token file that holds no accepted token; a login Vault refuses. An
// unreachable, sealed or failing server is ErrUnavailable: the store
// cannot tell.
//
// A token created without the default policy cannot look itself up;
// the check then fails with ErrPermission too.
func (s *store) CheckCredentials(ctx context.Context) error {
	err := s.call(ctx, func(ctx context.Context) error {
		_, err := s.client.Auth().Token().LookupSelfWithContext(ctx)
		return err
	})
	if err == nil {
		if s.auth != nil {
			s.auth.recovered()
		}
		return nil
	}
	var de *secretstore.Error
	if errors.As(err, &de) && de.Kind == edgesecrets.ErrPermission && (s.auth == nil || s.auth.tokenFailure() == nil) { //nolint:errorlint // kinds are compared as values: the kind itself, not an error chain
		// Refused although no login failed: a token without the
		// default policy's grant, or one revoked a moment ago.
		de.Err = fmt.Errorf("vault refused auth/token/lookup-self: the token is no longer valid, or its policies lack the default policy's grant of it: %w", de.Err)
	}
	return err
}
