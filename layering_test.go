package edgesecrets_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The layering rules of the architecture: which packages may depend on
// which. Each row names a package and module packages it must not depend
// on, even indirectly (go list -deps).
func TestLayering(t *testing.T) {
	const module = "github.com/edgesecrets/edgesecrets"
	for _, rule := range []struct {
		pkg       string
		forbidden []string
		why       string
	}{
		{".", []string{module + "/"}, "the shared vocabulary is a leaf"},
		{"./ohsecret", []string{module + "/secretstore", module + "/secretstore/", module + "/agreement/delivery", module + "/agreement/delivery/", module + "/agbot", module + "/agbot/"}, "Open Horizon's secret body is vocabulary both sides share"},
		{"./agreement", []string{module + "/secretstore"}, "the agent side never links the store client"},
		{"./agentapi", []string{module + "/secretstore"}, "the agent side never links the store client"},
		{"./agreement/identity", []string{module + "/secretstore"}, "the agent side never links the store client"},
		{"./agent", []string{module + "/secretstore", module + "/agreement/delivery", module + "/agreement/delivery/state", module + "/binding"}, "an agent binary holds no hub code"},
		{"./relay", []string{module + "/secretstore", module + "/agreement/delivery", module + "/agreement/delivery/state"}, "the relay carries envelopes only"},
		{"./agreement/delivery/state", []string{module + "/agreement/delivery", module + "/agreement/delivery/boltstate", module + "/agreement/delivery/pgstate"}, "the state contract stands below the engine and its implementations"},
		{"./agreement/delivery/state/statetest", []string{module + "/agreement/delivery", module + "/agreement/delivery/boltstate", module + "/agreement/delivery/pgstate"}, "the state contract stands below the engine and its implementations"},
		{"./secretstore", []string{module + "/agreement", module + "/binding", module + "/agentapi"}, "dependencies point toward the store, never from it"},
		{"./internal/storewatch", []string{module + "/agreement", module + "/agreement/", module + "/binding", module + "/agentapi", module + "/agbot", module + "/secretstore/memory", module + "/secretstore/vault", module + "/secretstore/awssm"}, "the delivery engine's watcher stands on secretstore and the vocabulary only"},
		{"./secretstore/memory", []string{module + "/secretstore/vault", module + "/secretstore/awssm"}, "backends never import each other"},
		{"./secretstore/vault", []string{module + "/secretstore/memory", module + "/secretstore/awssm"}, "backends never import each other"},
		{"./secretstore/awssm", []string{module + "/secretstore/memory", module + "/secretstore/vault"}, "backends never import each other"},
	} {
		t.Run(rule.pkg, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", rule.pkg).Output()
			require.NoError(t, err)
			deps := strings.Fields(string(out))
			require.NotEmpty(t, deps)
			self := deps[len(deps)-1] // go list -deps lists the package last
			for _, dep := range deps {
				for _, f := range rule.forbidden {
					if dep != self && (dep == f || strings.HasPrefix(dep, f) && strings.HasSuffix(f, "/")) {
						assert.Fail(t, "layering", "%s depends on %s: %s", self, dep, rule.why)
					}
				}
			}
		})
	}
}
