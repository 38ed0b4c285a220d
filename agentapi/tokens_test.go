package agentapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agentapi"
)

func TestTokenTableSet(t *testing.T) {
	tests := []struct {
		name     string
		id       string
		token    string
		wantErr  string // "" for success
		wantIDs  []string
		oldToken string // the token "a" keeps
	}{
		{name: "new instance", id: "b", token: "token-b", wantIDs: []string{"a", "b"}, oldToken: "token-a"},
		{name: "replaces a token", id: "a", token: "token-a2", wantIDs: []string{"a"}, oldToken: "token-a2"},
		{name: "empty token", id: "b", token: "", wantErr: `instance "b": invalid: the token is empty`, wantIDs: []string{"a"}, oldToken: "token-a"},
		{name: "empty token for a known instance", id: "a", token: "", wantErr: "the token is empty", wantIDs: []string{"a"}, oldToken: "token-a"},
		{name: "empty id", id: "", token: "CANARY-tok", wantErr: `instance id "": invalid`, wantIDs: []string{"a"}, oldToken: "token-a"},
		{name: "id with a colon", id: "x:y", token: "CANARY-tok", wantErr: "contains a colon", wantIDs: []string{"a"}, oldToken: "token-a"},
		{name: "id with a slash", id: "../b", token: "CANARY-tok", wantErr: `instance id "../b": invalid`, wantIDs: []string{"a"}, oldToken: "token-a"},
		{name: "dot-dot id", id: "..", token: "CANARY-tok", wantErr: "invalid", wantIDs: []string{"a"}, oldToken: "token-a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var table agentapi.TokenTable
			require.NoError(t, table.Set("a", "token-a"))
			err := table.Set(tt.id, tt.token)
			if tt.wantErr == "" {
				require.NoError(t, err)
				got, ok := table.Token(context.Background(), tt.id)
				assert.True(t, ok)
				assert.Equal(t, tt.token, got)
			} else {
				require.ErrorIs(t, err, edgesecrets.ErrInvalid)
				assert.ErrorContains(t, err, tt.wantErr)
				assert.NotContains(t, err.Error(), "CANARY")
			}
			assert.Equal(t, tt.wantIDs, table.IDs())
			got, ok := table.Token(context.Background(), "a")
			assert.True(t, ok)
			assert.Equal(t, tt.oldToken, got)
		})
	}
}

func TestTokenTableDelete(t *testing.T) {
	tests := []struct {
		name    string
		delete  []string
		wantIDs []string
	}{
		{name: "one", delete: []string{"a"}, wantIDs: []string{"b", "c"}},
		{name: "several", delete: []string{"c", "a"}, wantIDs: []string{"b"}},
		{name: "unknown ids are ignored", delete: []string{"zz", "b", ""}, wantIDs: []string{"a", "c"}},
		{name: "none", wantIDs: []string{"a", "b", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var table agentapi.TokenTable
			for _, id := range []string{"a", "b", "c"} {
				require.NoError(t, table.Set(id, "token-"+id))
			}
			table.Delete(tt.delete...)
			assert.Equal(t, tt.wantIDs, table.IDs())
			for _, id := range tt.delete {
				_, ok := table.Token(context.Background(), id)
				assert.False(t, ok, "deleted instance %q still has a token", id)
			}
			for _, id := range tt.wantIDs {
				got, ok := table.Token(context.Background(), id)
				assert.True(t, ok)
				assert.Equal(t, "token-"+id, got)
			}
		})
	}
}

func TestTokenTableZeroValue(t *testing.T) {
	var table agentapi.TokenTable
	_, ok := table.Token(context.Background(), "a")
	assert.False(t, ok)
	table.Delete("a")
	assert.Empty(t, table.IDs())
	assert.Equal(t, "map[]", table.String())
	var none *agentapi.TokenTable
	assert.Equal(t, "<nil>", fmt.Sprint(none))
}

// TestTokenTableConcurrent sets, deletes, looks up and prints tokens from
// many goroutines at once (run with -race), then checks each goroutine's
// last write won.
func TestTokenTableConcurrent(t *testing.T) {
	var table agentapi.TokenTable
	const workers, rounds = 8, 200
	var wg sync.WaitGroup
	for w := range workers {
		id := "inst-" + strconv.Itoa(w)
		wg.Go(func() {
			for i := range rounds {
				token := id + "-token-" + strconv.Itoa(i)
				if err := table.Set(id, token); err != nil {
					t.Error(err)
					return
				}
				if got, ok := table.Token(context.Background(), id); !ok || got != token {
					t.Errorf("%s: token %q, %v right after setting %q", id, got, ok, token)
					return
				}
				if i%3 == 2 {
					table.Delete(id)
				}
			}
		})
		wg.Go(func() { // a reader of every instance, as the handler is
			for range rounds {
				for v := range workers {
					table.Token(context.Background(), "inst-"+strconv.Itoa(v))
				}
				_ = table.String()
				_ = table.IDs()
			}
		})
	}
	wg.Wait()
	// rounds-1 = 199, and 199%3 == 1: every worker's last step was a Set.
	require.Len(t, table.IDs(), workers)
	for w := range workers {
		got, ok := table.Token(context.Background(), "inst-"+strconv.Itoa(w))
		assert.True(t, ok)
		assert.Equal(t, "inst-"+strconv.Itoa(w)+"-token-"+strconv.Itoa(rounds-1), got)
	}
}

// TestTokenTablePrintsNoToken prints a table, and structs holding one, in
// every way a program might, and checks that the ids show and the tokens
// never do.
func TestTokenTablePrintsNoToken(t *testing.T) {
	const canary = "CANARY-token"
	table := &agentapi.TokenTable{}
	require.NoError(t, table.Set("web-1", canary+"-1"))
	require.NoError(t, table.Set("db-1", canary+"-2"))
	type holder struct {
		Exported   agentapi.TokenTable
		unexported agentapi.TokenTable
		Pointer    *agentapi.TokenTable
	}
	h := &holder{Pointer: table}
	require.NoError(t, h.Exported.Set("web-1", canary+"-3"))
	require.NoError(t, h.unexported.Set("web-1", canary+"-4"))

	var text, js bytes.Buffer
	slog.New(slog.NewTextHandler(&text, nil)).Info("tokens", "table", table, "holder", h)
	slog.New(slog.NewJSONHandler(&js, nil)).Info("tokens", "table", table, "holder", h)
	marshalled, err := json.Marshal(h)
	require.NoError(t, err)

	printed := map[string]string{
		"%v":           fmt.Sprintf("%v", table),
		"%+v":          fmt.Sprintf("%+v", table),
		"%#v":          fmt.Sprintf("%#v", table),
		"%s":           fmt.Sprintf("%s", table),
		"%q":           fmt.Sprintf("%q", table),
		"%x":           fmt.Sprintf("%x", table),
		"%d":           fmt.Sprintf("%d", table),
		"String":       table.String(),
		"GoString":     fmt.Sprintf("%#v", table),
		"Println":      fmt.Sprintln(table),
		"holder %v":    fmt.Sprintf("%v", h),
		"holder %+v":   fmt.Sprintf("%+v", h),
		"holder %#v":   fmt.Sprintf("%#v", h),
		"slog text":    text.String(),
		"slog JSON":    js.String(),
		"json.Marshal": string(marshalled),
		"error":        fmt.Errorf("tokens %v", table).Error(),
	}
	for how, out := range printed {
		assert.NotContains(t, out, canary, how)
		assert.NotContains(t, strings.ToLower(out), strings.ToLower(fmt.Sprintf("%x", canary)), how)
	}
	assert.Equal(t, "map[db-1:[redacted] web-1:[redacted]]", printed["%v"])
	assert.Equal(t, printed["%v"], printed["%s"])
	assert.Equal(t, `&agentapi.TokenTable{"db-1":[redacted], "web-1":[redacted]}`, printed["%#v"])
	assert.Contains(t, printed["slog text"], "table.db-1=[redacted] table.web-1=[redacted]")
	assert.Contains(t, printed["slog JSON"], `"table":{"db-1":"[redacted]","web-1":"[redacted]"}`)
}

// TestHandlerWithTokenTable changes the table while the handler serves:
// an instance authenticates once it has a token, with its newest token
// only, and no longer once its token is deleted.
func TestHandlerWithTokenTable(t *testing.T) {
	table := &agentapi.TokenTable{}
	f := newAPIFixture(t, agentapi.HandlerOptions{Authenticate: table.Authenticate})
	steps := []struct {
		name   string
		change func(t *testing.T)
		token  string
		status int
	}{
		{name: "no token yet", token: "token-a", status: http.StatusUnauthorized},
		{name: "token set", change: func(t *testing.T) { require.NoError(t, table.Set("a", "token-a")) }, token: "token-a", status: http.StatusOK},
		{name: "wrong token", token: "token-b", status: http.StatusUnauthorized},
		{name: "token replaced: the old one fails", change: func(t *testing.T) { require.NoError(t, table.Set("a", "token-a2")) }, token: "token-a", status: http.StatusUnauthorized},
		{name: "token replaced: the new one works", token: "token-a2", status: http.StatusOK},
		{name: "another instance deleted", change: func(*testing.T) { table.Delete("b") }, token: "token-a2", status: http.StatusOK},
		{name: "token deleted", change: func(*testing.T) { table.Delete("a") }, token: "token-a2", status: http.StatusUnauthorized},
	}
	for _, step := range steps {
		if step.change != nil {
			step.change(t)
		}
		r := f.do(t, "GET", "/secrets", "a", step.token, nil)
		assert.Equal(t, step.status, r.status, "%s: %s", step.name, r.body)
	}
}

// TestTokenTableAuthenticate checks the credentials Authenticate accepts:
// a known instance id with its current token, and nothing else.
func TestTokenTableAuthenticate(t *testing.T) {
	table := &agentapi.TokenTable{}
	require.NoError(t, table.Set("web-1", "token-1"))
	require.NoError(t, table.Set("db-1", "token-2"))
	tests := []struct {
		name, user, password string
		ok                   bool
	}{
		{"instance and its token", "web-1", "token-1", true},
		{"another instance's token", "web-1", "token-2", false},
		{"wrong token", "web-1", "token-1x", false},
		{"prefix of the token", "web-1", "token-", false},
		{"empty token", "web-1", "", false},
		{"unknown instance", "web-2", "token-1", false},
		{"unknown instance, empty token", "web-2", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, ok := table.Authenticate(t.Context(), tt.user, tt.password)
			assert.Equal(t, tt.ok, ok)
			if tt.ok {
				assert.Equal(t, tt.user, id)
			} else {
				assert.Empty(t, id)
			}
		})
	}
}

// BenchmarkTokenAuthenticate authenticates against a table of 100
// instances from parallel goroutines, as the handler does.
//
//	go test -bench TokenAuthenticate -benchmem -run '^$' ./agentapi
func BenchmarkTokenAuthenticate(b *testing.B) {
	table := &agentapi.TokenTable{}
	for i := range 100 {
		id := "inst-" + strconv.Itoa(i)
		require.NoError(b, table.Set(id, "token-"+id))
	}
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if _, ok := table.Authenticate(ctx, "inst-42", "token-inst-42"); !ok {
				b.Error("inst-42 does not authenticate")
				return
			}
		}
	})
}

// A TokenTable's Authenticate method inside HandlerOptions prints no
// token through fmt, slog (text and JSON) or encoding/json.
func TestHandlerOptionsPrintNoToken(t *testing.T) {
	const canary = "CANARY-options-token"
	table := &agentapi.TokenTable{}
	require.NoError(t, table.Set("web-1", canary+"-1"))
	opts := agentapi.HandlerOptions{Authenticate: table.Authenticate, Prefix: "/api"}
	var text, js bytes.Buffer
	slog.New(slog.NewTextHandler(&text, nil)).Info("tokens", "opts", opts)
	slog.New(slog.NewJSONHandler(&js, nil)).Info("tokens", "opts", opts)
	marshalled, _ := json.Marshal(opts) //nolint:staticcheck // SA1026 is the point: it fails on the function, nothing printed
	printed := map[string]string{"slog text": text.String(), "slog JSON": js.String(), "json.Marshal": string(marshalled)}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
		printed["options "+verb] = fmt.Sprintf(verb, opts)
	}
	for how, out := range printed {
		assert.NotContains(t, out, canary, how)
		assert.NotContains(t, strings.ToLower(out), strings.ToLower(fmt.Sprintf("%x", canary)), how)
	}
	assert.Contains(t, printed["options %v"], "/api", "the options were printed")
}
