// Package binding is the hub side of secret associations: the "secrets" a
// service definition declares, the "secretBinding" entries of patterns and
// deployment policies that bind them to vault secrets, the vault secret name
// scopes, one validation report with every problem, and the agbot's
// secret-existence API with its client.
//
// Validate walks the deployed services and their whole dependency trees
// through a Resolver (an exchange client, or a Catalog of local files) and
// checks every rule, asking an ExistenceChecker whether the bound vault
// secrets exist: a StoreChecker on the agbot (Stat only, so no value is
// read), or a Client of the agbot's API in the CLI. The same call serves
// deploycheck, adding a deployment policy and publishing a pattern;
// ValidateService serves publishing a service.
//
// Vault secret names are relative to an organisation:
//
//	<name>                            organisation secret ("<org>/<name>" in the store)
//	user/<user>/<name>                user secret
//	node/<node>/<name>                organisation secret for one node
//	user/<user>/node/<node>/<name>    user secret for one node
//
// This package handles names, never values; its logs and errors name
// services, secrets and bindings only.
package binding
