package secretsapi_test

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/secretsapi"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

// The agbot serves the secrets-manager API over its store. The
// administrator adds a secret as hzn secretsmanager secret add does; a
// deployer checks that a binding's secret exists through the existence
// client, as hzn deploycheck does; a user cannot see another user's
// secrets.
func ExampleNewHandler() {
	// A real hook verifies the password with the exchange
	// (GET /orgs/{org}/users/{user}) and reads the user's admin flag.
	users := map[string]struct {
		password string
		role     secretsapi.Role
	}{"admin": {"admin-pw", secretsapi.RoleAdmin}, "alice": {"alice-pw", secretsapi.RoleUser}, "bob": {"bob-pw", secretsapi.RoleUser}}
	hook := func(_ context.Context, c secretsapi.Credentials) (secretsapi.Caller, error) {
		u, ok := users[c.User]
		if c.Org != "myorg" || !ok || subtle.ConstantTimeCompare([]byte(c.Secret), []byte(u.password)) != 1 {
			return secretsapi.Caller{}, errors.New("unknown user or wrong password")
		}
		return secretsapi.Caller{Org: c.Org, ID: c.User, Role: u.role}, nil
	}
	handler, err := secretsapi.NewHandler(secretsapi.Options{
		Store:        memory.New(), // its LastSuccess feeds /health
		Authenticate: hook,
	})
	if err != nil {
		panic(err)
	}
	agbot := httptest.NewServer(handler) // HZN_AGBOT_URL
	defer agbot.Close()

	call := func(user, method, path, body string) {
		req, _ := http.NewRequest(method, agbot.URL+path, strings.NewReader(body))
		req.SetBasicAuth("myorg/"+user, users[user].password) // hzn: -u myorg/<user>:<password>
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		answer, _ := io.ReadAll(resp.Body)
		fmt.Printf("%s %s %s: %d %s\n", user, method, path, resp.StatusCode, strings.TrimSpace(string(answer)))
	}
	call("admin", "PUT", "/org/myorg/secrets/hw-secret-name", `{"key":"name","value":"World"}`)
	call("alice", "PUT", "/org/myorg/secrets/user/alice/db", `{"key":"password","value":"pw"}`)
	call("alice", "LIST", "/org/myorg/secrets", "")
	call("bob", "LIST", "/org/myorg/secrets/user/alice/db", "")

	deployer, _ := secretsapi.NewClient(agbot.URL, secretsapi.ClientOptions{
		Org:       "myorg", // Open Horizon's route: LIST /org/myorg/secrets/<name>
		Authorize: func(r *http.Request) { r.SetBasicAuth("myorg/alice", "alice-pw") },
	})
	for _, s := range []string{"hw-secret-name", "missing", "user/bob/db"} {
		name, _ := binding.ParseVaultSecretName(s)
		exists, err := deployer.SecretExists(context.Background(), name)
		fmt.Println(s, exists, errors.Is(err, edgesecrets.ErrPermission))
	}
	// Output:
	// admin PUT /org/myorg/secrets/hw-secret-name: 201 "Secret created/updated."
	// alice PUT /org/myorg/secrets/user/alice/db: 201 "Secret created/updated."
	// alice LIST /org/myorg/secrets: 200 ["hw-secret-name"]
	// bob LIST /org/myorg/secrets/user/alice/db: 403 "Permission denied, user \"bob\" cannot list secret \"/user/alice/db\" in organization \"myorg\""
	// hw-secret-name true false
	// missing false false
	// user/bob/db false true
}

// An embedder whose store is not Vault (an anax secrets plugin over AWS
// Secrets Manager, say) asks the same policy the handler applies before
// it acts for a user.
func ExampleAuthorize() {
	alice := secretsapi.Caller{Org: "myorg", ID: "alice", Role: secretsapi.RoleUser}
	for _, s := range []string{"db/password", "user/alice/token", "user/bob/token"} {
		n, err := binding.ParseVaultSecretName(s)
		if err != nil {
			panic(err)
		}
		for _, a := range []secretsapi.Action{secretsapi.ActionExists, secretsapi.ActionRead, secretsapi.ActionWrite} {
			fmt.Printf("%s %s: %v\n", a, s, secretsapi.Authorize(alice, "myorg", n, a))
		}
	}
	fmt.Println("another organisation:", secretsapi.Authorize(alice, "otherorg", binding.VaultSecretName{}, secretsapi.ActionList))
	// Output:
	// check db/password: true
	// read db/password: false
	// create db/password: false
	// check user/alice/token: true
	// read user/alice/token: true
	// create user/alice/token: true
	// check user/bob/token: false
	// read user/bob/token: false
	// create user/bob/token: false
	// another organisation: false
}
