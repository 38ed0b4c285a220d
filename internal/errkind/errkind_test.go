package errkind_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/edgesecrets/edgesecrets/internal/errkind"
)

func TestNew(t *testing.T) {
	kind, other := errors.New("kind"), errors.New("other")
	a, b := errkind.New("a", kind), errkind.New("b", kind)
	tests := []struct {
		name   string
		target error
		want   bool
	}{
		{"itself", a, true},
		{"the kind it refines", kind, true},
		{"another kind", other, false},
		{"a sibling refining the same kind", b, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, errors.Is(fmt.Errorf("wrapped: %w", a), tt.target))
		})
	}
	assert.Equal(t, "a", a.Error())
	assert.False(t, errors.Is(kind, a), "the kind does not match its refinement")
}
