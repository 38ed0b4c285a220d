// Package agbotsecrets is an Open Horizon agbot secrets plugin over the
// edgesecrets library: it implements anax's
// agreementbot/secrets.AgbotSecrets over any *secretstore.Store (Vault,
// AWS Secrets Manager, memory or an out-of-tree backend), so that anax's
// own secure API, agreement workers and secret updater run unchanged on
// the library. Importing the package registers the plugin with anax's
// registry under the name "edgesecrets" (Name); an agbot selects it with
//
//	"AgreementBot": {
//	  "SecretsProvider": "edgesecrets",
//	  "SecretsProviderConfig": "/etc/horizon/edgesecrets.json",
//	  ...
//	}
//
// and the file SecretsProviderConfig names holds
//
//	{"store": <a secretstore config, as secretstore.ParseConfig reads it>,
//	 "changeFile": "/var/horizon/edgesecrets-changes.json",
//	 "userAuthMount": "openhorizon"}
//
// "store" is required; the other members are optional. Secrets live in
// the store under anax's layout, names relative to the store's scope:
// "<org>/<name>", "<org>/user/<user>/<name>", "<org>/node/<node>/<name>"
// and "<org>/user/<user>/node/<node>/<name>" (binding.VaultSecretName's
// StorePath). On Vault that is the KV v2 mount "openhorizon" with no
// parent path or scope, where anax's own Vault plugin keeps them, so both
// plugins read the same secrets.
//
// # The agbot's credentials
//
// The agbot reads and lists with the store's own credentials. On Vault
// they may be Open Horizon's: auth method "openhorizon" (the
// vault-exchange-auth plugin, as anax's Vault plugin logs in). When the
// store config's vault.auth has method "openhorizon" and no exchangeID,
// Initialize fills in the agbot's exchange id and token from anax's config
// (AgreementBot.ExchangeId and ExchangeToken), so the file needs no
// credential:
//
//	{"store": {"type": "vault", "vault": {"address": "https://vault:8200",
//	   "mount": "openhorizon", "kvVersion": "2", "auth": {"method": "openhorizon"}}}}
//
// # Users' requests
//
// anax's secure API passes each request's exchange user ("org/user") and
// password or token to the plugin. On Vault the plugin logs that user in
// through auth/<userAuthMount>/login (default "openhorizon") and runs the
// request with the user's token (vault.AsCaller), so Vault's ACL policy
// for the user decides, exactly as with anax's Vault plugin; the agbot's
// token is never used to write. On a store that is not Vault, the plugin
// reads the user's role from the exchange with the user's own credentials
// (GET <exchange>/orgs/{org}/users/{user}: its "admin" flag) and applies
// secretsapi.Authorize, the library's copy of vault-exchange-auth's
// policies, before using the agbot's store. Errors are anax's types
// (NoSecretFound, PermissionDenied, Unauthenticated,
// SecretsProviderUnavailable, BadRequest, InvalidResponse, Unknown), chosen
// case by case as anax's Vault plugin chooses them, so that the secure API
// and hzn show the same status and text. They never hold a secret value,
// token or password; an outage is SecretsProviderUnavailable without the
// store's address.
//
// # Rotations (the change clock)
//
// anax's secret updater compares GetSecretMetadata's UpdateTime, in whole
// seconds, with the time it recorded (a 32-bit column in its PostgreSQL
// database): a store time alone misses a rotation made in the same second
// as the last report, and KV v1 has no time at all. The plugin therefore
// reports an UpdateTime that moves whenever the secret's content tag
// (secretstore.ContentTag, with the store's time of the revision) does and
// never repeats for different content: for a new tag it is the largest of
// the store's time in seconds (now, when the store keeps none) and the
// last time reported for that secret plus one; the same tag gets the same
// time again. A secret seen missing counts as a change too, so one deleted
// and written again is reported as new. The clock is kept in changeFile
// (JSON, written atomically, mode 0600; tags only as HMAC-SHA256 under a
// random key kept in the same file, so the file holds no plain checksum of
// a value; whoever reads the file can still test guesses of a low-entropy
// value kept on a store without versions, so keep it as you would a
// password-hash file), read at Login, so a restarted agbot reports the same times; a
// corrupt file fails Login rather than being reset. Without changeFile the
// clock is kept in memory only: after a restart, a rotation made in the
// same second as the last report before it may be missed.
//
// anax's bolt agbot database keeps no managed secrets (its functions are
// stubs), so an agbot on bolt sees no rotation whatever the plugin
// reports: rotation needs anax's PostgreSQL database.
package agbotsecrets
