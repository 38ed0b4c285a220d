package relay

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/edgesecrets/edgesecrets/agreement/identity"
)

// FuzzLostError reads arbitrary refusal bodies from the relay, which is
// untrusted: only a well-formed body with one of the three reason tokens
// says the identity is lost, and nothing of the body's text is kept.
func FuzzLostError(f *testing.F) {
	for _, r := range []string{reasonUnknown, reasonRevoked, reasonExpired, "replayed", ""} {
		b, _ := json.Marshal(apiError{Error: "refused", Reason: r})
		f.Add(b)
	}
	f.Add([]byte(`{"reason":"revoked","error":5}`))
	f.Add([]byte("not json"))
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > 4<<10 {
			return // beyond what lostError reads
		}
		err := lostError(bytes.NewReader(body))
		var e apiError
		wellFormed := json.NewDecoder(bytes.NewReader(body)).Decode(&e) == nil
		switch {
		case !wellFormed || (e.Reason != reasonUnknown && e.Reason != reasonRevoked && e.Reason != reasonExpired):
			assert.Nil(t, err)
		default:
			assert.ErrorIs(t, err, identity.ErrIdentityLost)
			assert.True(t, errors.Is(err, identity.ErrUnknownInstance) || errors.Is(err, identity.ErrRevoked) || errors.Is(err, identity.ErrExpired))
		}
	})
}
