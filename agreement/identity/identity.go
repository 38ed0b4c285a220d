package identity

import (
	"fmt"
	"strings"

	"github.com/edgesecrets/edgesecrets"
)

// sanScheme is the scheme of the two SAN URIs an agent certificate carries.
const sanScheme = "edgesecrets"

// The two kinds of edgesecrets SAN URI (the URI's host part).
const (
	uriKindNode     = "node"
	uriKindInstance = "instanceid"
)

// maxElementLen bounds every name element (provider, org, node, instance id).
const maxElementLen = 128

// Identity names one agent instance: the provider that launched it and its
// instance id within that provider, and the organisation and node it runs
// as. A certificate carries it as subject CN = Node plus exactly two SAN
// URIs, edgesecrets://node/<org>/<node> and
// edgesecrets://instanceid/<provider>/<instance-id>.
//
// Every element is 1 to 128 characters from the URI unreserved set
// (A–Z a–z 0–9 - . _ ~), and not "." or "..", so it is a single path
// element that needs no escaping in a URI or an HTTP path.
type Identity struct {
	// Provider names who launched the instance and vouches for it through
	// attestation (e.g. "aws.us-west-2", "openhorizon.factory1").
	Provider string `json:"provider"`
	// Org is the node's organisation.
	Org string `json:"org"`
	// Node is the node id; it is the certificate's subject CN.
	Node string `json:"node"`
	// InstanceID is unique within the provider; the hub keeps one record
	// per (Provider, InstanceID).
	InstanceID string `json:"instanceId"`
}

// isZero reports whether every element is empty.
func (id Identity) isZero() bool { return id == Identity{} }

// String returns "<provider>/<org>/<node>/<instance-id>".
func (id Identity) String() string {
	return id.Provider + "/" + id.Org + "/" + id.Node + "/" + id.InstanceID
}

// Validate reports every bad element in one edgesecrets.ErrInvalid error.
func (id Identity) Validate() error {
	var problems []string
	for _, f := range []struct{ name, value string }{
		{"provider", id.Provider}, {"org", id.Org}, {"node", id.Node}, {"instance id", id.InstanceID},
	} {
		if p := checkElement(f.value); p != "" {
			problems = append(problems, f.name+" "+p)
		}
	}
	if len(problems) > 0 {
		return newError(opDecode, Identity{}, edgesecrets.ErrInvalid, strings.Join(problems, "; "), nil)
	}
	return nil
}

// nodeURI returns "edgesecrets://node/<org>/<node>".
func (id Identity) nodeURI() string {
	return sanScheme + "://" + uriKindNode + "/" + id.Org + "/" + id.Node
}

// instanceURI returns "edgesecrets://instanceid/<provider>/<instance-id>".
func (id Identity) instanceURI() string {
	return sanScheme + "://" + uriKindInstance + "/" + id.Provider + "/" + id.InstanceID
}

// path returns the instance's HTTP resource path,
// "/instance/<provider>/<org>/<node>/<instance-id>".
func (id Identity) path() string {
	return "/instance/" + id.String()
}

// checkElement returns what is wrong with a name element, or "".
func checkElement(s string) string {
	switch {
	case s == "":
		return "is empty"
	case len(s) > maxElementLen:
		return fmt.Sprintf("is longer than %d characters", maxElementLen)
	case s == "." || s == "..":
		return fmt.Sprintf("%q is not a name", s)
	}
	for i := 0; i < len(s); i++ {
		if !unreserved(s[i]) {
			return fmt.Sprintf("has a character outside A-Z a-z 0-9 - . _ ~ at byte %d", i)
		}
	}
	return ""
}

func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// identityFromNames builds the Identity a CSR or certificate names, from its
// subject CN and its SAN URIs (raw strings, in order), and checks them:
// exactly one node URI and one instance-id URI, each in canonical form, no
// other URI, and CN equal to the node id.
func identityFromNames(cn string, uris []string) (Identity, error) {
	var id Identity
	var nodes, instances int
	for _, raw := range uris {
		scheme, rest, ok := strings.Cut(raw, "://")
		if !ok || scheme != sanScheme {
			return Identity{}, fmt.Errorf("SAN URI with scheme %q: only %s:// URIs are allowed", uriScheme(raw), sanScheme)
		}
		kind, path, _ := strings.Cut(rest, "/")
		if kind != uriKindNode && kind != uriKindInstance {
			return Identity{}, fmt.Errorf("unknown SAN URI kind %s://%s/: want %q or %q", sanScheme, clip(kind), uriKindNode, uriKindInstance)
		}
		first, second, ok := strings.Cut(path, "/")
		if !ok || checkElement(first) != "" || checkElement(second) != "" {
			return Identity{}, fmt.Errorf("SAN URI %s://%s/... is not of the form %s://%s/<a>/<b> with two valid name elements", sanScheme, kind, sanScheme, kind)
		}
		if kind == uriKindNode {
			nodes++
			id.Org, id.Node = first, second
		} else {
			instances++
			id.Provider, id.InstanceID = first, second
		}
	}
	if nodes != 1 {
		return Identity{}, fmt.Errorf("%d node SAN URIs (%s://%s/...), want exactly 1", nodes, sanScheme, uriKindNode)
	}
	if instances != 1 {
		return Identity{}, fmt.Errorf("%d instance-id SAN URIs (%s://%s/...), want exactly 1", instances, sanScheme, uriKindInstance)
	}
	if cn != id.Node {
		return Identity{}, fmt.Errorf("subject CN %q is not the node id %q of the node SAN URI", clip(cn), id.Node)
	}
	return id, nil
}

func nameError(reason string) error {
	return newError(opDecode, Identity{}, edgesecrets.ErrInvalid, reason, nil)
}

// uriScheme returns the part of raw before "://" (or ":"), clipped, for
// error messages.
func uriScheme(raw string) string {
	s, _, _ := strings.Cut(raw, ":")
	return clip(s)
}

// clip shortens attacker-supplied text quoted in an error.
func clip(s string) string { return clipN(s, 64) }

func clipN(s string, max int) string {
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}
