// Package edgesecrets delivers credentials from a hub's secret store to
// service containers on edge nodes without the values ever appearing in
// deployment metadata, logs or errors.
//
// This package holds the vocabulary every other package shares, and
// imports none of them: [Data], a secret's values, which never print
// ([Redacted] in their place); and the error kinds ([ErrNotFound],
// [ErrPermission], [ErrUnavailable], [ErrConflict], [ErrInvalid], [KindOf])
// that every package's errors match with errors.Is, each package's own
// refinements included. The agent's packages (agent, agentapi, agreement,
// the agent side of agreement/identity) need nothing else from the hub's:
// they never import secretstore.
//
// The flow:
//
//	vault admin ──writes──▶ secret store (Vault KV / AWS Secrets Manager / memory)
//	                             ▲   │ Stat/Get (agbot only; agents never touch the store)
//	deployer ── binding ──▶ agbot: binding.Validate ─▶ delivery.Engine.Register(agreement,
//	                             │                     bindings resolved to store names)
//	                             └▶ delivery.Engine: watches the bound secrets, seals proposal,
//	                                updates and cancellations to the agent's certified key,
//	                                retries until acknowledged; state in a file or PostgreSQL
//	                                                  │ (any untrusted transport)
//	agent: agreement.Open ─▶ agentapi.Store: root-only files, one folder per service
//	       instance, bind-mounted read-only at /open-horizon-secrets/<secret-name>
//	service container ─▶ agentapi.NewHandler: GET /secrets, GET /secrets/{name}, POST ...?received=true
//
// Which package for what:
//
//   - [github.com/edgesecrets/edgesecrets/secretstore]: the portable Store
//     type over a backend's driver (validation, retries, call counts,
//     metrics), the Secret model, and config and backend registry.
//   - secretstore/driver: the interface a backend implements.
//   - secretstore/memory, secretstore/vault, secretstore/awssm: the backends.
//     Import one for its side effect of registering with secretstore.Open.
//   - secretstore/storetest: the conformance suite for a backend of your own.
//   - binding: service secrets, secret bindings, their validation report and
//     the client of the agbot's secret-existence API.
//   - secretsapi: the agbot's secrets-manager API (Open Horizon's routes, as
//     hzn uses them) with its authorization policy, the existence route,
//     deploycheck and /health.
//   - agreement: keys, sealed envelopes, proposal/update/reply messages and
//     replay protection (both sides).
//   - agreement/delivery: the agbot's delivery engine, the one component an
//     agbot embeds: durable, level-triggered delivery of proposals, updates
//     and cancellations; delivery/state (the contract between the engine
//     and its state, and a state in memory), delivery/boltstate (its
//     embedded state file), delivery/pgstate (PostgreSQL, shared by several
//     agbots) and delivery/state/statetest (the state conformance suite).
//   - agreement/identity: agent identity certificates the agbot checks before
//     sealing secrets to an agent.
//   - agentapi: on-node secret files and the service-facing secrets API, in
//     the design's profile or Open Horizon's (/api/v1/secrets).
//   - agbot: the hub side assembled (engine, identity issuer, deploy step,
//     and one HTTP handler with the secrets-manager API, the identity API
//     and the message relay), one Options and Run.
//   - agent: the node side assembled (identity kept registered, the relay
//     polled, messages applied, the services' API), one Options and Run.
//   - relay: the agreement-message relay between them, standing in for the
//     Open Horizon exchange.
//   - mock: test doubles for embedders (a fault-injecting Store, a dev agent).
package edgesecrets
