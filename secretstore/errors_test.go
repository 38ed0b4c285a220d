package secretstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

var allKinds = []error{edgesecrets.ErrNotFound, edgesecrets.ErrPermission, edgesecrets.ErrUnavailable, edgesecrets.ErrConflict, edgesecrets.ErrInvalid}

func TestErrorKinds(t *testing.T) {
	cause := errors.New("HTTP 503")
	for _, kind := range allKinds {
		t.Run(kind.Error(), func(t *testing.T) {
			err := &secretstore.Error{Op: "put", Name: "app/db", Kind: kind, Err: cause}
			assert.ErrorIs(t, err, kind)
			assert.ErrorIs(t, err, cause, "the cause is matched too")
			for _, other := range allKinds {
				if other != kind { //nolint:errorlint // compares the table's values, not an error chain
					assert.NotErrorIs(t, err, other)
				}
			}
			assert.Equal(t, kind, edgesecrets.KindOf(err))
			assert.Equal(t, `secretstore: put "app/db": `+kind.Error()+": HTTP 503", err.Error(), "message names op, secret, kind and cause")

			wrapped := fmt.Errorf("binding check: %w", err)
			assert.ErrorIs(t, wrapped, kind, "matches through %%w")
			assert.Equal(t, kind, edgesecrets.KindOf(wrapped))
			var se *secretstore.Error
			require.ErrorAs(t, wrapped, &se)
			assert.Equal(t, "put", se.Op)
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
		{"no cause", &secretstore.Error{Op: "get", Name: "a/b", Kind: edgesecrets.ErrNotFound}, `secretstore: get "a/b": not found`, edgesecrets.ErrNotFound},
		{"no name", &secretstore.Error{Op: "open", Kind: edgesecrets.ErrInvalid, Err: errors.New("bad scope")}, `secretstore: open: invalid: bad scope`, edgesecrets.ErrInvalid},
		{"odd name is quoted", &secretstore.Error{Op: "list", Name: "x\ny", Kind: edgesecrets.ErrInvalid}, `secretstore: list "x\ny": invalid`, edgesecrets.ErrInvalid},
		{"context error, no kind", &secretstore.Error{Op: "stat", Name: "n", Err: context.Canceled}, `secretstore: stat "n": context canceled`, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, c.err.Error())
			assert.Equal(t, c.kind, edgesecrets.KindOf(c.err))
		})
	}
	ctxErr := &secretstore.Error{Op: "stat", Name: "n", Err: context.DeadlineExceeded}
	assert.ErrorIs(t, ctxErr, context.DeadlineExceeded)
	assert.Nil(t, edgesecrets.KindOf(errors.New("plain")))
	assert.Nil(t, edgesecrets.KindOf(nil))
}
