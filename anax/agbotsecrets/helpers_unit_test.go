package agbotsecrets_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/open-horizon/anax/exchange"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/anax/agbotsecrets"
	"github.com/edgesecrets/edgesecrets/ohsecret"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

// Credentials of the unit tests' exchange users and agbot.
const (
	unitAgbot      = "org1/agbot1"
	unitAgbotToken = "agbot-token"
	unitAdmin      = "org1/admin"
	unitAlice      = "org1/alice"
	unitBob        = "org1/bob"
	unitPassword   = "pw-of-"
)

// unitExchange is a stub of the exchange's GET /orgs/{org}/users/{user},
// the one route the plugin calls, answering as the exchange does: 401 for
// wrong credentials, the user's definition with its admin flag otherwise.
type unitExchange struct {
	*httptest.Server
	mu     sync.Mutex
	admins map[string]bool // "org/user" → admin
	down   bool
	calls  int
}

func newUnitExchange(t *testing.T) *unitExchange {
	t.Helper()
	x := &unitExchange{admins: map[string]bool{unitAdmin: true, unitAlice: false, unitBob: false}}
	x.Server = httptest.NewServer(http.HandlerFunc(x.serve))
	t.Cleanup(x.Close)
	return x
}

func (x *unitExchange) serve(w http.ResponseWriter, r *http.Request) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.calls++
	if x.down {
		http.Error(w, "down", http.StatusBadGateway)
		return
	}
	org, user, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/orgs/"), "/users/")
	id, pw, basic := r.BasicAuth()
	admin, known := x.admins[id]
	if r.Method != http.MethodGet || !ok || !basic || !known || pw != unitPassword+id {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if id != org+"/"+user {
		w.WriteHeader(http.StatusForbidden)
		return
	}
	_ = json.NewEncoder(w).Encode(exchange.GetUsersResponse{Users: map[string]exchange.UserDefinition{id: {Password: "********", Admin: admin}}})
}

// unitFixture is a plugin over a memory store holding a secret of every
// scope, with the stub exchange.
type unitFixture struct {
	store  *secretstore.Store
	plugin *agbotsecrets.Plugin
	x      *unitExchange
	logs   *bytes.Buffer
}

// The fixture's secrets, by store name.
var unitSecrets = map[string]ohsecret.Details{
	"org1/a":                    {Key: "ka", Value: "va"},
	"org1/dir/b":                {Key: "kb", Value: "vb"},
	"org1/node/n1/c":            {Key: "kc", Value: "vc"},
	"org1/user/alice/d":         {Key: "kd", Value: "vd"},
	"org1/user/alice/node/n1/e": {Key: "ke", Value: "ve"},
	"org1/user/bob/f":           {Key: "kf", Value: "vf"},
	"org2/g":                    {Key: "kg", Value: "vg"},
}

func newUnitFixture(t *testing.T, changeFile string) *unitFixture {
	t.Helper()
	f := &unitFixture{store: memory.New(), x: newUnitExchange(t), logs: &bytes.Buffer{}}
	for name, d := range unitSecrets {
		putUnit(t, f.store, name, d.Data())
	}
	f.plugin = newUnitPlugin(t, f.store, f.x.URL, changeFile, f.logs)
	return f
}

// newUnitPlugin makes a logged-in plugin over st.
func newUnitPlugin(t *testing.T, st *secretstore.Store, exchangeURL, changeFile string, logs *bytes.Buffer) *agbotsecrets.Plugin {
	t.Helper()
	var log *slog.Logger
	if logs != nil {
		log = slog.New(slog.NewTextHandler(&lockedWriter{w: logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	p, err := agbotsecrets.New(agbotsecrets.Options{
		Store: st, AgbotID: unitAgbot, AgbotToken: unitAgbotToken,
		ExchangeURL: exchangeURL, ChangeFile: changeFile, Logger: log,
	})
	require.NoError(t, err)
	require.NoError(t, p.Login())
	return p
}

// lockedWriter serializes a buffer's writes for concurrent tests.
type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func putUnit(t testing.TB, st *secretstore.Store, name string, d edgesecrets.Data) {
	t.Helper()
	_, err := st.Put(context.Background(), &secretstore.Secret{Name: name, Data: d}, secretstore.PutOptions{})
	require.NoError(t, err)
}

// pw is a unit user's password.
func pw(user string) string { return unitPassword + user }
