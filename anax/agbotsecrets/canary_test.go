package agbotsecrets_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/open-horizon/anax/agreementbot/secrets"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNoValueInLogsOrErrors runs every kind of call, failures included,
// with a debug logger and checks that neither the log nor any error's text
// holds a secret value or a password.
func TestNoValueInLogsOrErrors(t *testing.T) {
	f := newUnitFixture(t, "")
	p := f.plugin
	const canary = "canary-v4lue-9f3b"
	var errs []error
	note := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	value := secrets.SecretDetails{Key: "k", Value: canary}
	note(p.CreateOrgSecret(unitAdmin, pw(unitAdmin), "org1", "c", value))
	note(p.CreateOrgSecret(unitAlice, pw(unitAlice), "org1", "c", value))                      // refused
	note(p.CreateOrgSecret(unitAdmin, canary, "org1", "c", value))                             // a password that is a value
	note(p.CreateOrgSecret(unitAdmin, pw(unitAdmin), "org1", "a//b", value))                   // bad name
	big := secrets.SecretDetails{Key: "k", Value: strings.Repeat(canary, 1<<20/len(canary)+1)} // over the memory store's limit
	err := p.CreateOrgSecret(unitAdmin, pw(unitAdmin), "org1", "big", big)
	var br *secrets.BadRequest
	require.ErrorAs(t, err, &br, "a value over the store's limit")
	note(err)
	got, err := p.GetSecretDetails(unitAgbot, unitAgbotToken, "org1", "", "", "c")
	require.NoError(t, err)
	assert.Equal(t, canary, got.Value)
	_, err = p.GetSecretDetails(unitAlice, pw(unitAlice), "org1", "", "", "c")
	note(err)
	_, err = p.GetSecretMetadata("org1", "", "", "c")
	note(err)
	_, err = p.ListAllSecrets(unitAdmin, pw(unitAdmin), "org1", "")
	note(err)
	note(p.DeleteOrgSecret(unitAdmin, pw(unitAdmin), "org1", "c"))
	require.NotEmpty(t, errs)

	logs := f.logs.String()
	require.NotEmpty(t, logs, "the debug log was written")
	for _, leak := range []string{canary, unitAgbotToken, pw(unitAdmin), pw(unitAlice)} {
		assert.NotContains(t, logs, leak)
		for _, e := range errs {
			assert.NotContains(t, e.Error(), leak)
			assert.NotContains(t, fmt.Sprintf("%+v", e), leak)
		}
	}
	assert.NotContains(t, p.String(), unitAgbotToken)
}
