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
// must be a single safe path element ([agreement.CheckSecretName]) without a colon, because
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
//	instances/<id>/          0700, or 0750 + group for Instance.GroupReadable (+ o+x, see below)
//	instances/<id>/<secret>  0400, or 0440 + group, or its FileOptions; one file per service secret name
//	status/<id>/             same modes; SECRETS_PROVIDED, SECRETS_UPDATED (Options.StatusFiles)
//	meta/<id>                0600 JSON: agreement, service, SHA-256 per file, updated/acknowledged
//	                         names, the sequence of the newest message applied
//	agreements.json          0600 JSON: per agreement, the replay floor and the last reply sequence
//	tmp/                     0700 staging area for atomic writes, emptied by Open
//
// The embedder bind-mounts the instance's [InstanceInfo].MountSource
// (from [Store.Instance]) read-only at [MountTarget] (/open-horizon-secrets)
// in the instance's container.
//
// Every file is written to tmp/ first, given its final mode and group,
// fsynced, and renamed into place, so a reader sees the old file or the new
// one and never a partial one, a container never sees a staging file in its
// mount, and a crash leaves at most a staging file that the next Open wipes.
// A file whose content has the SHA-256 recorded in the metadata is not
// rewritten (its modification time stays). Metadata is written the same
// way.
//
// Nothing below the root is reached through a symlink: the root is opened
// once, and every path below it is resolved relative to that descriptor
// with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS) on Linux 5.6 and later,
// and one openat(O_NOFOLLOW) per path element elsewhere. A symlink planted
// in place of an instance directory, one of the root's own directories or a
// file is refused (reads fail, Open reports it), never followed.
//
// # File content
//
// A secret of format [agreement.FormatRaw] is written as its single value's
// bytes (for a secret written the Open Horizon way, a "key" and a "value":
// the value's); one of format [agreement.FormatValueOnly] (Open Horizon's
// "value_only") as the bytes of its "value" key ([agreement.ContentKey]). A secret of format
// [agreement.FormatJSON] (the default) is written
// as one compact JSON object with its keys in sorted order: a value that is
// valid UTF-8 becomes a JSON string; any other value becomes an object
// {"base64":"<standard base64 of the bytes>"}, so a consumer can tell binary
// values apart by their JSON type. Keys must be valid UTF-8. For binary
// secrets prefer format raw.
//
// # Owner and mode per file
//
// [Instance].Files gives a secret's file its own owner, group and mode
// ([FileOptions]: UID, GID, Mode), for a container that runs as a user of
// its own. They are checked when the instance is declared
// ([Instance.Check], and again by ApplyProposal): a mode must include
// owner read and grant nothing to others, and holds no setuid, setgid or
// sticky bit; ids are not negative; a refusal matches
// [edgesecrets.ErrInvalid] and names the file and the rule. They are
// applied like the defaults, on the staging file's descriptor (fchown,
// fchmod) before the rename, never through a link. An instance one of
// whose files has an owner (or a group other than the instance's) gets
// o+x on its directory, so that owner can reach the file through the
// mount: search only, never listing; the file's own mode keeps others
// out. The options are kept in the instance's metadata, so updates (and
// files restored after a reboot) get them too; a proposal applied again
// with other options rewrites the files concerned.
//
// # Templated files
//
// A secret's file can instead be rendered from a Go text/template
// (FileOptions.Template, like Vault Agent's template stanza) over the
// secret's keys: the data (.) is a map of key to value as a string, and
// a key the template names but the secret lacks is an error. Besides
// text/template's built-ins, only the functions [TemplateFuncs] lists
// are defined (base64Encode, base64Decode, json, toJSON, pemBlock, pem,
// envQuote, keys): a template has no file, environment or network
// access, and one calling anything else does not parse, which
// Instance.Check reports when it is declared. Two ready formats need no
// template (FileOptions.Output): [OutputEnv], KEY="value" lines in key
// order, and [OutputPEMBundle], the PEM values concatenated in key order.
//
// A rendered file is written as any other (atomically, same modes, the
// replaced content wiped). A template that fails on the data a message
// brings renders nothing: the whole message is rejected, the last good
// files stay, the error matches [ErrTemplateFailed], the reply's reason
// starts with [ReasonTemplateFailed] ("TemplateFailed: "), and the store
// logs a WARN naming the instance, the secret and the template's position
// (never the error's text, which may quote the data).
//
// # Removal and rotation
//
// [Store.Remove] overwrites every file of an instance in place with random
// bytes of the same length, fsyncs it, unlinks it, and then removes the
// instance's directories and metadata; with [Options.Tokens] the
// instance's token is deleted first, so its credentials stop working at
// once. Symlinks and other non-regular entries are unlinked without being
// followed. A rotation does the same to the content it replaces: the old
// file is kept linked in tmp/ for two seconds (a reader that opened it just
// before the rename still reads it whole) and then overwritten and
// unlinked, so a descriptor held on it afterwards reads random bytes.
//
// # Receiving agreement messages
//
// A [Receiver] is the whole agent side of the protocol: [Receiver.Receive]
// opens an envelope from the agbot, applies it (a proposal, an update of
// kind [agreement.UpdateKindSecrets], or [agreement.UpdateKindCancel],
// which removes the agreement's instances) and returns the sealed reply.
// Its replay guard lives in the Store: one sequence floor per agreement,
// shared by the proposal and every update, saved in agreements.json and
// also in the metadata of every instance a message changed, written
// together with its files. Open takes the larger of the two, so a lost,
// truncated or corrupt agreements.json never lets an old envelope roll an
// instance back. The message at exactly the floor (resent because its
// reply was lost) is applied again, which changes nothing, and answered
// again; older ones are refused without a reply. Reply sequences are saved
// before a reply is returned, and never reused.
//
// # Plaintext never on disk
//
// With [Options.MemoryDir] (Linux) the instances' files and status files
// live on a memory-backed filesystem and no secret value is ever written
// to persistent storage, as Kubernetes does for secret volumes. The root
// keeps the metadata (names, never digests) and, inside each instance's
// metadata, a copy of its files sealed to the agent's own keys
// ([Options.SealKeys], the agreement keys the agbot seals to): after an
// agent restart or a node reboot, Open restores the files from it. Set it
// up with a tmpfs the agent's user owns, mode 0700, not swapped out:
//
//	mount -t tmpfs -o size=64m,mode=0700,noswap,nosuid,nodev tmpfs /run/myagent/secrets
//
// (noswap needs Linux 6.4; on older kernels disable swap or use ramfs,
// which is never swapped but has no size limit). Open refuses a MemoryDir
// that is not tmpfs or ramfs, and a root written in the other mode. The
// sealed copy is only as safe as the agent's key file: keep it on storage
// the agent alone can read, or in a key store.
//
// # Serving the API
//
// Serve the handler from an http.Server with ReadHeaderTimeout,
// ReadTimeout, WriteTimeout and IdleTimeout set, MaxHeaderBytes small (the
// API needs a few hundred bytes), and a bound on concurrent connections
// well below the process's descriptor limit, so that clients holding
// connections open can neither lock out the services nor starve the
// agent's own state writes. The example agent does this with
// examples/internal/demo.Listen (5 s, 30 s, 30 s, 60 s, 16 KiB, 256
// connections; when full it closes the connection idle the longest).
//
// Make the handler the server's own handler (http.Server.Handler), or
// mount it behind something that neither cleans nor redirects paths
// (http.StripPrefix), never on an http.ServeMux pattern: the mux answers a
// non-canonical path (a//b, a/../b) with a redirect to the cleaned one
// before the handler runs, and the client follows it to another name. The
// handler refuses, with 400, a path that is not canonical as sent (an
// empty, "." or ".." segment, a double or trailing slash, %2F, %2e), a
// request that followed a redirect from one (its Referer, set by Go's
// client), and a query string other than POST's received=true (a name
// holding '?' sent unescaped); credentials are checked first, as for
// every request. It never redirects.
//
// # The /secrets API
//
// [NewHandler] returns an http.Handler serving, relative to its prefix:
//
//	GET  /secrets                     200 ["<name>",...] updated and not yet acknowledged; 404 if none
//	GET  /secrets/{name}              200 {"<name>":{"details":"<base64 of the file content>"}}; 400 not a secret of the caller
//	POST /secrets/{name}?received=true 201, acknowledges the name (also when never fetched); 400 not a secret of the caller or received is not "true"
//
// Every request needs HTTP Basic credentials, which
// [HandlerOptions].Authenticate checks: usually [TokenTable.Authenticate],
// the instance id and its token (compared in constant time), for instances
// that come and go; a caller only ever sees its own instance's secrets.
// Missing or bad credentials: 401. Other methods: 405 with Allow. Paths outside the
// API: 404. Request bodies over the limit: 413. A storage failure: 500.
// Every error body is {"error":"<sentence>"}. Only names the instance's
// metadata lists are served, and only from regular files: a symlink, FIFO
// or directory in their place is never followed or read.
// After the embedder reports a service restart ([Store.ServiceRestarted]),
// GET /secrets answers 404 until the next update: the mount already holds
// the newest values.
//
// That is the design profile. [HandlerOptions].OpenHorizon serves instead
// the API Open Horizon's agent ships and its services call:
// /api/v1/secrets and /api/v1/secrets/{name}, the body {"key":…,"value":…},
// anax's status codes (403 for bad credentials, 404 for a name that is not
// the caller's) and plain-text errors (the option's documentation has the
// details). An Authenticate function of the embedder's own checks
// credentials of another shape, such as Open Horizon's ESS id and token.
// Open Horizon serves the API over HTTPS, on a unix socket
// ($HZN_ESS_API_ADDRESS) with a certificate the agent mounts into the
// container ($HZN_ESS_CERT); examples/agent does the same.
//
// # Logging and errors
//
// Loggers and errors receive instance ids, agreement ids, secret names,
// counts and paths, never a secret value or a token.
// Errors match [edgesecrets.ErrInvalid] (bad name or message),
// [edgesecrets.ErrNotFound] (unknown instance, agreement, service or secret)
// or [edgesecrets.ErrConflict] (an instance id already used by another
// agreement or service) with errors.Is; [ReplyFor] turns the outcome of an
// apply into the agreement.Reply the agent sends back.
package agentapi
