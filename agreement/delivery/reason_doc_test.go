package delivery

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The operator's guide has a row for every reason code and names every
// condition.
func TestOperationsGuideExplainsEveryReasonAndCondition(t *testing.T) {
	guide, err := os.ReadFile(filepath.Join("..", "..", "OPERATIONS.md"))
	require.NoError(t, err)
	for _, code := range reasonCodes {
		assert.Contains(t, string(guide), "| `"+string(code)+"` |", "a row for %s", code)
	}
	for _, c := range conditionOrder {
		assert.True(t, strings.Contains(string(guide), "`"+string(c)+"`"), "condition %s", c)
	}
}
