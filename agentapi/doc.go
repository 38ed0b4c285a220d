// Package agentapi is the node side of secret delivery: it stores the
// secrets of decrypted agreement messages in files that the agent
// bind-mounts into service containers, and serves the service-facing
// /secrets REST API through which a running service learns about and
// fetches updated secrets.
//
// # Instances
//
// Secrets belong to a service instance: one running service, or one
// container of a multi-container service. A proposal names services
// ([agreement.ServiceRef]); the embedder, which decides what runs on the
// node, says which instance receives each service's secrets by passing an
// [Instances] map to [Store.ApplyProposal]. The instance id is chosen by the
// embedder (an Open Horizon agent would use its container instance key); it
// must be a single safe path element ([CheckName]) without a colon, because
// it is also the HTTP Basic user id the service authenticates with. Updates
// ([Store.ApplyUpdate]) name the same agreement and ServiceRef, and the store
// finds the instance from what the proposal recorded.
//
// # Layout on disk
//
// Under the root directory chosen by the embedder (mode 0700, owned by the
// agent's user; Open refuses a root that is a symlink, not owned by the
// agent, or accessible to group or others):
//
//	instances/<id>/          0700, or 0750 + group for Instance.GroupReadable
//	instances/<id>/<secret>  0400, or 0440 + group; one file per service secret name
//	status/<id>/             same modes; SECRETS_PROVIDED, SECRETS_UPDATED (Options.StatusFiles)
//	meta/<id>                0600 JSON: agreement, service, SHA-256 per file, updated/acknowledged names
//	tmp/                     0700 staging area for atomic writes, emptied by Open
//
// The embedder bind-mounts [Store.MountSource] read-only at [MountTarget]
// (/open-horizon-secrets) in the instance's container.
//
// Every file is written to tmp/ first, given its final mode and group,
// fsynced, and moved into place with github.com/natefinch/atomic's
// ReplaceFile, so a reader sees the old file or the new one and never a
// partial one, a container never sees a staging file in its mount, and a
// crash leaves at most a staging file that the next Open wipes. A file whose
// content has the SHA-256 recorded in the metadata is not rewritten (its
// modification time stays). Metadata is written the same way.
//
// # File content
//
// A secret of format [agreement.FormatRaw] is written as its single value's
// bytes; one of format [agreement.FormatValueOnly] (Open Horizon's
// "value_only") as the bytes of its "value" key. A secret of format
// [agreement.FormatJSON] (the default) is written
// as one compact JSON object with its keys in sorted order: a value that is
// valid UTF-8 becomes a JSON string; any other value becomes an object
// {"base64":"<standard base64 of the bytes>"}, so a consumer can tell binary
// values apart by their JSON type. Keys must be valid UTF-8. For binary
// secrets prefer format raw.
//
// # Removal
//
// [Store.Remove] overwrites every file of an instance in place with random
// bytes of the same length, fsyncs it, unlinks it, and then removes the
// instance's directories and metadata. Symlinks and other non-regular
// entries are unlinked without being followed.
//
// # The /secrets API
//
// [NewHandler] returns an http.Handler serving, relative to its prefix:
//
//	GET  /secrets                     200 ["<name>",...] updated and not yet acknowledged; 404 if none
//	GET  /secrets/{name}              200 {"<name>":{"details":"<base64 of the file content>"}}; 400 not a secret of the caller
//	POST /secrets/{name}?received=true 201, acknowledges the name (also when never fetched); 400 not a secret of the caller or received is not "true"
//
// Every request needs HTTP Basic credentials: the instance id and its token
// (looked up through [Tokens] and compared in constant time); a caller only
// ever sees its own instance's secrets. A [TokenTable] holds the tokens of
// instances that come and go; [StaticTokens] is a fixed table. Missing or
// bad credentials: 401. Other methods: 405 with Allow. Paths outside the
// API: 404. Request bodies over the limit: 413. A storage failure: 500.
// Every error body is {"error":"<sentence>"}. Only names the instance's
// metadata lists are served, and only from regular files: a symlink, FIFO
// or directory in their place is never followed or read.
// After the embedder reports a service restart ([Store.ServiceRestarted]),
// GET /secrets answers 404 until the next update: the mount already holds
// the newest values.
//
// # Logging and errors
//
// Loggers and errors receive instance ids, agreement ids, secret names,
// counts and paths, never a secret value or a token.
// Errors match [secretstore.ErrInvalid] (bad name or message),
// [secretstore.ErrNotFound] (unknown instance, agreement, service or secret)
// or [secretstore.ErrConflict] (an instance id already used by another
// agreement or service) with errors.Is; [Reply] turns the outcome of an
// apply into the agreement.Reply the agent sends back.
package agentapi
