// Package binding is the hub side of secret associations: the secrets a
// service definition declares, the "secretBinding" entries of patterns and
// deployment policies that bind them to vault secrets, the vault secret name
// scopes, and one validation report with every problem.
//
// Validate walks the deployed services and their whole dependency trees
// through a Resolver (an exchange client, or NewCatalog over local files)
// and checks every rule, asking an ExistenceChecker whether the bound vault
// secrets exist: NewStoreChecker on the agbot (Stat only, so no value is
// read), or a secretsapi.Client of the agbot's API in the CLI. The same call serves the
// three points where Open Horizon checks bindings (Options.Point):
// publishing a pattern or deployment policy, `hzn deploycheck`, and the
// agbot before an agreement; ValidateService serves publishing a service.
// Report.Bindings then resolves a clean report for one node: each service
// (container) with its secrets' ordered candidate store names.
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
//
// # Open Horizon and the design text
//
// Open Horizon as shipped (open-horizon/anax, open-horizon/examples) and the
// design text this library started from disagree in places. Decoding
// accepts both; behaviour follows shipped Open Horizon:
//
//   - Service secrets: Open Horizon declares them per container,
//     deployment.services.<container>.secrets, and for cluster services in
//     clusterDeployment.secrets; the design text at the top of the
//     definition. All three are read. A secret goes to every container that
//     declares it (and to the cluster deployment when it declares it); a
//     top-level secret goes to the container serviceContainer names, or to
//     the only one. Secrets of a cluster service are bound like any other:
//     the design text's "secrets on a cluster-only service are an error" is
//     superseded and now applies to top-level secrets only.
//   - Formats: the default writes the secret as a JSON object, which for an
//     Open Horizon secret is {"key":…,"value":…} as anax writes it;
//     "value_only" writes the value alone; "raw" (ours) writes the only
//     key's value.
//   - secretBinding: Open Horizon's "secrets": [{"<service secret>":
//     "<vault secret>"}] and the design's "bindings": {"<service secret>":
//     {"vaultSecret": "<vault secret>"}} are both read, and an entry is
//     written back in the form it came in. enableNodeLevelSecrets is kept:
//     such a binding resolves per node to the node-level secret first and
//     the organisation- or user-level one next, as anax's agbot looks it up.
//     serviceContainer, which Open Horizon does not have, is optional and
//     narrows an entry to one container.
//   - Severities: a binding no service needs is a note (a warning in
//     deploycheck), a missing vault secret at publication a warning, as in
//     anax (see Code). Every problem keeps a stable code, the service, the
//     secret and a sentence.
//
// # Where anax stops early and this package reports everything
//
// One Validate call reports every problem of the whole dependency tree,
// where anax stops at the first:
//
//   - compcheck.ValidateSecretBindingForSingleService returns at the first
//     declared secret bound to an invalid vault name, and checks the
//     secrets of only one container of a multi-container service (its loop
//     keeps the last container's result);
//   - compcheck.VerifySecretBindingForServiceCache and the publish commands
//     (cli/exchange ValidateSecretBindingForSvcAndDep) return at the first
//     service, top-level or dependency, with an unbound secret;
//   - compcheck.VerifyVaultSecrets_strict (deploycheck) returns at the
//     first vault secret that is missing or cannot be checked;
//   - compcheck.GetSecretBindingForService returns at the first entry whose
//     serviceVersionRange does not parse;
//   - the agbot's ValidateAndExtractSecrets returns at the first secret it
//     cannot read;
//   - deploycheck stops at the first compatible version of a service unless
//     asked to check all (--check-all).
//
// # Deliberate differences from anax
//
//   - Every entry that selects a service applies, not only the first; where
//     two bind the same secret of the same container the first still wins
//     (binding_conflict, a warning, when they differ).
//   - Every container that declares a secret is checked and receives it,
//     and both the device and the cluster deployment of a service that has
//     both.
//   - Every listed version of the deployed service is checked; anax's
//     deploycheck is satisfied when one is compatible.
//   - A binding that names a node without enableNodeLevelSecrets resolves
//     to that node's secret (the design text, and anax's secret updater);
//     anax's agbot drops the node segment and reads the organisation-level
//     secret. With enableNodeLevelSecrets such a name resolves to itself and
//     then to the name without the node, as anax's deploycheck checks it
//     (anax's agbot would use the agreement's node instead).
//   - Every member of a "secrets" item is read; anax reads one, chosen by
//     Go's random map order.
//   - Names anax's parser accepts but that name no store secret or are
//     ambiguous ("user/<u>/node", "user/<u>/node/<n>", "user/<u>/", empty
//     or ".." segments) are invalid; service secret names must be single
//     safe file names and formats must be known, where anax writes whatever
//     it is given.
//   - A missing node-level secret with a fallback is reported
//     (node_secret_fallback) at the agreement as a note; anax's agbot falls
//     back silently.
package binding
