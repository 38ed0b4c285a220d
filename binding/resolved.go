package binding

// ServiceBinding is one service (container) of a deployment with each of
// its secrets resolved to store names for one node: what the agbot's
// delivery engine keeps current on that node.
type ServiceBinding struct {
	// Service is the service (container) the secrets are mounted into.
	Service ServiceRef
	// Secrets maps each service secret name (its file name on the node) to
	// the store secrets it is bound to.
	Secrets map[string]BoundSecret
}

// BoundSecret is the store secret a service secret resolves to.
type BoundSecret struct {
	// StoreNames are store paths in order of preference: with
	// enableNodeLevelSecrets, the node-level secret first, then the
	// organisation- or user-level one. The first that exists is delivered;
	// when it is deleted, the next one is. Never empty.
	StoreNames []string
	// Format is how the agent lays the secret out in its file.
	Format string
}
