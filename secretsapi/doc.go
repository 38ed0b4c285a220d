// Package secretsapi is the agbot's HTTP API, server and client, routes
// and bodies. The server (NewHandler) serves the secrets-manager API: the routes Open
// Horizon's agbot serves under its secure API, which administrators use
// through hzn secretsmanager, with per-user authorization built in; the
// compatibility check /deploycheck/secretbindingcompatible; the design's
// existence route; /health; and, given Options.Operations, the operator
// routes under /admin/. The client (NewClient) asks the existence routes
// and /health, as hzn does. hzn deploycheck secretbinding does not call
// the compatibility route: it checks each bound secret with LIST
// /org/{org}/secrets/{name} (open-horizon/anax cli/deploycheck/
// secretbinding.go line 67, through compcheck and exchange/secret.go lines
// 15-35, commit 2f3fa5a), which this package serves too.
//
// The handler reads and writes the agbot's secret store
// (secretstore.Store) with the agbot's own credentials, and only after its
// policy allowed the request: who may do what is decided here, not by the
// store. Vault secret names follow package binding (ParseVaultSecretName):
// relative to an organisation, "<name>", "user/<user>/<name>",
// "node/<node>/<name>" and "user/<user>/node/<node>/<name>", stored under
// "<org>/".
//
// # Routes
//
// As open-horizon/anax agreementbot/secure_api.go (commit
// 2f3fa5a506d6565fa68858b7963450567ddda114, lines 189-203) has them; LIST
// is an HTTP method, as in Vault:
//
//	LIST   /org/{org}/secrets                            200 ["<name>",...] the organisation's secrets (not user/, node/)
//	LIST   /org/{org}/allsecrets                         200 ["<name>",...] every secret the caller may list, relative to the org
//	LIST   /org/{org}/secrets/user/{u}[/node/{n}]        200 [...] names under the directory, relative to it
//	LIST   /org/{org}/secrets/node/{n}                   200 [...] names under the directory, relative to it
//	LIST   /org/{org}/secrets/{name}                     200 {"exists":true|false}, always 200
//	GET    /org/{org}/secrets/{name}                     200 {"key":"…","value":"…"}; 404 missing
//	PUT    /org/{org}/secrets/{name}  {"key","value"}    201 "Secret created/updated." (POST the same)
//	DELETE /org/{org}/secrets/{name}                     204; 404 missing
//	OPTIONS on any of them                               200 with Allow, without credentials
//	GET    /deploycheck/secretbindingcompatible          200 {"compatible","reason","problems"}
//	GET    /secrets/{name}                               the design route: 200 {"exists":true}, 404 {"exists":false}
//	GET    /health                                       200 {"configuration":{…},"liveHealth":{"lastDBHeartbeat":…,"lastVaultInteraction":…}}, no credentials
//	GET    /admin/health                                 200 delivery.Health (administrators; Options.Operations)
//	GET    /admin/agreements[?condition=&reason=&after=&limit=]  200 delivery.Page of the agreements not in sync (administrators)
//	GET    /admin/agreements/{id}                        200 delivery.Status; 404 no such agreement (administrators)
//	POST   /admin/cancellations/release                  200 {"released":n} (administrators)
//
// {name} may be of any scope, as in anax's per-scope routes, and is sent
// as it is: a path that is not canonical (an empty, "." or ".." segment, a
// double or trailing slash, an escaped slash %2F or dot %2e) and a query
// string on a secret route (hzn sends a name holding '?' unescaped, "q?x=1"
// as the path "q" and a query) are answered 400 before anything else,
// never served as another name. Errors of the
// Open Horizon routes are a JSON string (anax's sentences where anax has
// one, which hzn prints); those of the design route {"error","code"}. A
// request is checked in this order, so that nothing a caller may not see
// decides its answer: 404 not a route; 401 no credentials, or refused by
// Options.Authenticate; 503 no store configured; 400 a bad organisation or
// name; 405 a method the path does not take; 403 refused by the policy;
// then the store: 404 (GET, DELETE of a missing secret), 503 store
// unavailable or refusing the agbot (clients retry a few times), 400 a name
// or secret the store refuses, 500 anything else. A body over
// Options.MaxBodyBytes, and a secret over the store's limit per secret
// (secretstore.Store.MaxValueBytes: 64 KiB on AWS Secrets Manager, 32 MiB
// on Vault, 1 MiB in memory), are answered 400 naming the limit, before
// anything is written: hzn handles 201, 400, 401, 403 and 503 on a write
// (cli/secrets_manager/secrets_manager.go line 253), not 413. The rest of
// an oversized body is read and dropped first, up to 8 × MaxBodyBytes and
// at least 8 MiB in all, so that a client still sending it reads the
// answer; beyond that the answer closes the connection. No error text
// holds a percent sign, since hzn prints them through a printf: escapes
// are told in words, and a percent sign in a name the text quotes is
// written \u0025. A request carrying "Prefer: wait=<seconds>" (RFC
// 7240, as Client sends under a deadline) is answered within
// that wait: a store that has not answered by then is a 503, and the
// answer says "Preference-Applied: wait=<seconds>". A secret's data is mapped onto {"key","value"}:
// what a PUT wrote is {"key","value"} again; a secret with one entry gives
// its name and value; any other gives an empty key and its data as a JSON
// object in the value.
//
// # Mounting
//
// Mount the handler as the server's own handler (http.Server.Handler), in
// front of anything else the server serves, which it passes on through
// Options.Fallback; or behind something that neither cleans nor
// redirects paths (http.StripPrefix does neither). Do not mount it on an
// http.ServeMux pattern: the mux answers a non-canonical path (a//b,
// a/../b, ./b) with a redirect to the cleaned path before the handler
// runs, and Go's http.Client, which is hzn's, follows a 307 with the same
// method and body, so "DELETE /org/o/secrets/zzz/../dot.name" would delete
// "dot.name". (anax's router answers 301 there, after which a PUT or
// DELETE comes back as a GET.) As the server's handler, it checks the path
// as the client sent it (Request.RequestURI) and refuses a non-canonical
// one with 400 for every path, those it passes to Fallback included, so
// that no mux behind it redirects one. It also refuses a request whose
// Referer shows that its client followed a redirect from a non-canonical
// path of the same host (Go's client sets it), which is what a cleaning
// mux in front of it leaves; other clients get no such protection there.
// The handler itself never redirects.
//
// # Authentication
//
// Credentials are read as anax reads them ([Credentials]): HTTP Basic
// "<org>/<user>:<password>", or "Authorization: Bearer <token>" with
// X-Organization and X-UserId. The Options.Authenticate hook verifies them
// (Open Horizon asks the exchange) and returns the [Caller]: organisation,
// id and [Role]. A refusal is 401.
//
// # Authorization
//
// One explicit matrix of role, scope and action ([Authorize], exported for
// embedders over other stores) decides every request; a caller may only
// touch its own organisation. Scopes are seen
// from the caller: its own user secrets ("user/<caller>/...", with their
// node-level ones) or another user's.
//
//	                 org            node           own user       other user
//	admin            all            all            all            list, exists, delete
//	user             list, exists   list, exists   all            -
//	node             -              -              -              -
//
// (all: read, list, exists, write, delete.) It follows the Vault policies
// open-horizon/vault-exchange-auth attaches to exchange users
// (plugin/policy.go): users read and write only their own secrets and may
// list and check the organisation's; an admin writes the organisation's
// and node secrets and its own, and may list, check and delete, but not
// read or write, other users' secrets, whose data paths the plugin denies
// while its metadata grant stays. The plugin knows no nodes, and anax's
// routes take user credentials only: nodes, which receive their secrets
// through agreements, get nothing. Where anax itself departs from its
// policy, this package follows the policy: anax's allsecrets omits a
// user's own secrets (its walk of user/ is denied and the error ignored);
// here it lists them.
//
// A refused request is answered 403 before the store is asked, so the
// answer is the same whether or not the secret exists. A deploycheck
// checks each bound secret as the caller may see it.
//
// # Logging
//
// Every write, delete and read is logged at info level with the caller and
// the secret's name, never its value; so is every refusal. Credentials
// and the hook's errors are never logged.
package secretsapi
