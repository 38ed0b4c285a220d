package secretstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/secretstore"
)

var allKinds = []error{secretstore.ErrNotFound, secretstore.ErrPermission, secretstore.ErrUnavailable, secretstore.ErrConflict, secretstore.ErrInvalid}

func TestErrorKinds(t *testing.T) {
	cause := errors.New("HTTP 503")
	for _, kind := range allKinds {
		t.Run(kind.Error(), func(t *testing.T) {
			err := secretstore.NewError(secretstore.OpPut, "app/db", kind, cause)
			assert.ErrorIs(t, err, kind)
			assert.ErrorIs(t, err, cause, "the cause is matched too")
			for _, other := range allKinds {
				if other != kind {
					assert.NotErrorIs(t, err, other)
				}
			}
			assert.Equal(t, kind, secretstore.KindOf(err))
			assert.Equal(t, `secretstore: put "app/db": `+kind.Error()+": HTTP 503", err.Error(), "message names op, secret, kind and cause")

			wrapped := fmt.Errorf("binding check: %w", err)
			assert.ErrorIs(t, wrapped, kind, "matches through %%w")
			assert.Equal(t, kind, secretstore.KindOf(wrapped))
			var se *secretstore.Error
			require.ErrorAs(t, wrapped, &se)
			assert.Equal(t, secretstore.OpPut, se.Op)
			assert.Equal(t, "app/db", se.Name)

			flattened := fmt.Errorf("binding check: %v", err)
			assert.NotErrorIs(t, flattened, kind, "%%v keeps the message only")
			assert.Contains(t, flattened.Error(), `put "app/db"`)
		})
	}
}

func TestErrorMessages(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want string
		kind error
	}{
		{"no cause", secretstore.NewError(secretstore.OpGet, "a/b", secretstore.ErrNotFound, nil), `secretstore: get "a/b": not found`, secretstore.ErrNotFound},
		{"no name", secretstore.NewError(secretstore.OpOpen, "", secretstore.ErrInvalid, errors.New("bad scope")), `secretstore: open: invalid: bad scope`, secretstore.ErrInvalid},
		{"odd name is quoted", secretstore.NewError(secretstore.OpList, "x\ny", secretstore.ErrInvalid, nil), `secretstore: list "x\ny": invalid`, secretstore.ErrInvalid},
		{"context error, no kind", secretstore.NewError(secretstore.OpStat, "n", nil, context.Canceled), `secretstore: stat "n": context canceled`, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, c.err.Error())
			assert.Equal(t, c.kind, secretstore.KindOf(c.err))
		})
	}
	ctxErr := secretstore.NewError(secretstore.OpStat, "n", nil, context.DeadlineExceeded)
	assert.ErrorIs(t, ctxErr, context.DeadlineExceeded)
	assert.Nil(t, secretstore.KindOf(errors.New("plain")))
	assert.Nil(t, secretstore.KindOf(nil))
}

// A credential check's result keeps its promise: refused, cannot tell,
// or a context error; any other kind becomes ErrUnavailable with its cause.
func TestCredentialCheckError(t *testing.T) {
	cause := errors.New("HTTP 400")
	op := secretstore.OpCheckCredentials
	cases := []struct {
		name string
		in   error
		kind error // nil: returned unchanged
		text string
	}{
		{name: "nil", in: nil},
		{name: "refused", in: secretstore.NewError(op, "", secretstore.ErrPermission, cause)},
		{name: "cannot tell", in: secretstore.NewError(op, "", secretstore.ErrUnavailable, cause)},
		{name: "context", in: secretstore.NewError(op, "", nil, context.Canceled)},
		{name: "invalid", in: secretstore.NewError(op, "", secretstore.ErrInvalid, cause), kind: secretstore.ErrUnavailable,
			text: "secretstore: check-credentials: store unavailable: HTTP 400"},
		{name: "not found", in: secretstore.NewError(op, "", secretstore.ErrNotFound, cause), kind: secretstore.ErrUnavailable,
			text: "secretstore: check-credentials: store unavailable: HTTP 400"},
		{name: "foreign error with a kind", in: fmt.Errorf("odd: %w", secretstore.ErrConflict), kind: secretstore.ErrUnavailable,
			text: "secretstore: check-credentials: store unavailable: odd: conflict"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := secretstore.CredentialCheckError(c.in)
			if c.kind == nil {
				assert.Equal(t, c.in, got)
				return
			}
			assert.Equal(t, c.kind, secretstore.KindOf(got))
			for _, other := range allKinds {
				if other != c.kind {
					assert.NotErrorIs(t, got, other, "one kind only")
				}
			}
			assert.EqualError(t, got, c.text)
		})
	}
}
