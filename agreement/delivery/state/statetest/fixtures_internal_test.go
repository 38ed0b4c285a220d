package statetest

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The records the suite stores set every field a Backend must keep, so that
// a Backend forgetting one fails the suite's round trips (the embedded
// state once dropped Record.Unanswered, and nothing noticed). A field
// added to Record must be set here too.
func TestFixtureSetsEveryRecordField(t *testing.T) {
	r := reflect.ValueOf(*record(t, "agr-1", "node-1", []string{"org/node/node-1/a", "org/a"}, []string{"org/b"}))
	for i := range r.NumField() {
		name := r.Type().Field(i).Name
		switch name {
		case "NextAttempt", "Revision", "Cancel":
			continue // the suite sets them per case: due marks, Create, a cancellation's phase
		}
		assert.False(t, r.Field(i).IsZero(), "the fixture's record leaves %s zero", name)
	}
}
