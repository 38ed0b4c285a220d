package agreement_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/mock"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

var (
	proposalWeb = agreement.ServiceRef{Org: "acme", URL: "web", Version: "1.0.0", Arch: "amd64", Container: "web"}
	proposalDB  = agreement.ServiceRef{Org: "acme", URL: "web", Version: "1.0.0", Arch: "amd64", Container: "db"}
)

// proposalStore holds acme/db (two keys), acme/tls (one key) and acme/pair
// (two keys), wrapped in a call-recording mock.
func proposalStore(t *testing.T) (*mock.Store, map[string]*secretstore.Secret) {
	t.Helper()
	mem := memory.New()
	for _, s := range []*secretstore.Secret{
		{Name: "acme/db", Data: secretstore.Data{"user": []byte("app"), "password": []byte("CANARY-db")}},
		{Name: "acme/tls", Data: secretstore.Data{"cert": []byte("CANARY-tls")}},
		{Name: "acme/pair", Data: secretstore.Data{"a": []byte("CANARY-pair-a"), "b": []byte("CANARY-pair-b")}},
	} {
		_, err := mem.Put(context.Background(), s, secretstore.PutOptions{})
		require.NoError(t, err)
	}
	stored := map[string]*secretstore.Secret{}
	for _, n := range []string{"acme/db", "acme/tls", "acme/pair"} {
		s, err := mem.Get(context.Background(), n)
		require.NoError(t, err)
		stored[n] = s
	}
	return mock.NewStore(mem), stored
}

func TestReadProposal(t *testing.T) {
	bindings := []agreement.ServiceBinding{
		{Service: proposalWeb, Secrets: map[string]agreement.BoundSecret{
			"db":  {VaultSecret: "acme/db"},
			"tls": {VaultSecret: "acme/tls", Format: agreement.FormatRaw},
		}},
		{Service: proposalDB, Secrets: map[string]agreement.BoundSecret{
			"password": {VaultSecret: "acme/db", Format: agreement.FormatJSON},
		}},
	}
	store, stored := proposalStore(t)

	p, sent, err := agreement.ReadProposal(context.Background(), store.Store, "ag-1", bindings)
	require.NoError(t, err)

	assert.Equal(t, agreement.Proposal{Version: agreement.MessageVersion, AgreementID: "ag-1", Services: []agreement.ServiceSecrets{
		{Service: proposalWeb, Secrets: map[string]agreement.SecretDetails{
			"db":  {Data: stored["acme/db"].Data},
			"tls": {Format: agreement.FormatRaw, Data: stored["acme/tls"].Data},
		}},
		{Service: proposalDB, Secrets: map[string]agreement.SecretDetails{
			"password": {Format: agreement.FormatJSON, Data: stored["acme/db"].Data},
		}},
	}}, p)
	require.NoError(t, p.Validate())

	dbTag, tlsTag := stored["acme/db"].ContentTag(), stored["acme/tls"].ContentTag()
	require.False(t, dbTag.IsZero())
	assert.Equal(t, []agreement.ServiceBinding{
		{Service: proposalWeb, Secrets: map[string]agreement.BoundSecret{
			"db":  {VaultSecret: "acme/db", Sent: dbTag},
			"tls": {VaultSecret: "acme/tls", Format: agreement.FormatRaw, Sent: tlsTag},
		}},
		{Service: proposalDB, Secrets: map[string]agreement.BoundSecret{
			"password": {VaultSecret: "acme/db", Format: agreement.FormatJSON, Sent: dbTag},
		}},
	}, sent)

	// Each distinct store secret is read once, in one batch; nothing else
	// is read.
	require.Equal(t, 1, store.Count(mock.AnyOp))
	require.Equal(t, 1, store.Count(mock.OpGetBatch))
	assert.ElementsMatch(t, []string{"acme/db", "acme/tls"}, store.Calls()[0].Names)
	// The caller's bindings keep their zero tags.
	assert.True(t, bindings[0].Secrets["db"].Sent.IsZero())
	assert.True(t, bindings[1].Secrets["password"].Sent.IsZero())
}

// TestReadProposalFeedsTracker: a secret rotates after ReadProposal read it
// and before the watcher's first look. Registered with what ReadProposal
// returned, its agreement gets the rotation exactly once; an agreement over
// a secret that did not change gets nothing.
func TestReadProposalFeedsTracker(t *testing.T) {
	eachStoreKind(t, func(t *testing.T, e *trackerEnv) {
		e.put("s1", "v1")
		e.put("s2", "only")
		p, sent, err := agreement.ReadProposal(context.Background(), e.reader, "a1", []agreement.ServiceBinding{svc("web", map[string]string{"db": "s1"})})
		require.NoError(t, err)
		assert.Equal(t, "v1", string(p.Services[0].Secrets["db"].Data["value"]))
		require.NoError(t, e.tracker.Register("a1", sent))
		_, sent, err = agreement.ReadProposal(context.Background(), e.reader, "a2", []agreement.ServiceBinding{svc("web", map[string]string{"db": "s2"})})
		require.NoError(t, err)
		require.NoError(t, e.tracker.Register("a2", sent))

		e.put("s1", "v2")
		e.cycle()
		assert.Equal(t, updates{"a1": {"web": {"db": "v2"}}}, e.queue.take(t))
		e.cycle()
		assert.Empty(t, e.queue.take(t), "exactly once")
	})
}

func TestReadProposalErrors(t *testing.T) {
	web := func(secrets map[string]agreement.BoundSecret) []agreement.ServiceBinding {
		return []agreement.ServiceBinding{{Service: proposalWeb, Secrets: secrets}}
	}
	tests := []struct {
		name        string
		agreementID string
		bindings    []agreement.ServiceBinding
		setup       func(*mock.Store)
		kind        error
		wantErr     []string
		missing     string // the Name of the first *secretstore.Error, for missing secrets
		reads       int    // store calls made
	}{
		{name: "empty agreement id", bindings: web(map[string]agreement.BoundSecret{"db": {VaultSecret: "acme/db"}}),
			kind: secretstore.ErrInvalid, wantErr: []string{"agreement id is empty"}},
		{name: "invalid store name", agreementID: "ag-1", bindings: web(map[string]agreement.BoundSecret{"db": {VaultSecret: "acme/../db"}}),
			kind: secretstore.ErrInvalid, wantErr: []string{`invalid store secret name "acme/../db"`}},
		{name: "unknown format", agreementID: "ag-1", bindings: web(map[string]agreement.BoundSecret{"db": {VaultSecret: "acme/db", Format: "yaml"}}),
			kind: secretstore.ErrInvalid, wantErr: []string{`unknown format "yaml"`}},
		{name: "unsafe service secret name", agreementID: "ag-1", bindings: web(map[string]agreement.BoundSecret{"../db": {VaultSecret: "acme/db"}}),
			kind: secretstore.ErrInvalid, wantErr: []string{"not a single file name"}},
		{name: "one secret missing", agreementID: "ag-1",
			bindings: web(map[string]agreement.BoundSecret{"db": {VaultSecret: "acme/db"}, "gone": {VaultSecret: "acme/gone"}}),
			kind:     secretstore.ErrNotFound, wantErr: []string{`get "acme/gone": not found`}, missing: "acme/gone", reads: 2},
		{name: "two secrets missing", agreementID: "ag-1",
			bindings: web(map[string]agreement.BoundSecret{"x": {VaultSecret: "acme/x"}, "gone": {VaultSecret: "acme/gone"}}),
			kind:     secretstore.ErrNotFound, wantErr: []string{`"acme/gone": not found`, `"acme/x": not found`}, missing: "acme/gone", reads: 2},
		{name: "store unavailable", agreementID: "ag-1", bindings: web(map[string]agreement.BoundSecret{"db": {VaultSecret: "acme/db"}}),
			setup: func(s *mock.Store) { s.SetUnavailable(true) }, kind: secretstore.ErrUnavailable, reads: 1},
		{name: "raw secret with two keys", agreementID: "ag-1",
			bindings: web(map[string]agreement.BoundSecret{"pair": {VaultSecret: "acme/pair", Format: agreement.FormatRaw}}),
			kind:     agreement.ErrInvalidMessage, wantErr: []string{`format "raw" needs exactly one key, has 2`}, reads: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store, _ := proposalStore(t)
			if tt.setup != nil {
				tt.setup(store)
			}
			p, sent, err := agreement.ReadProposal(context.Background(), store.Store, tt.agreementID, tt.bindings)
			require.ErrorIs(t, err, tt.kind)
			for _, want := range tt.wantErr {
				assert.ErrorContains(t, err, want)
			}
			assert.NotContains(t, err.Error(), "CANARY")
			assert.Zero(t, p)
			assert.Nil(t, sent)
			if tt.reads == 0 {
				assert.Zero(t, store.Count(mock.AnyOp), "nothing read")
			} else {
				require.Equal(t, 1, store.Count(mock.AnyOp), "one batch")
				assert.Len(t, store.Calls()[0].Names, tt.reads, "each distinct secret asked for once")
			}
			if tt.missing != "" {
				var serr *secretstore.Error
				require.True(t, errors.As(err, &serr))
				assert.Equal(t, tt.missing, serr.Name)
				assert.Equal(t, secretstore.OpGet, serr.Op)
			}
		})
	}
}
