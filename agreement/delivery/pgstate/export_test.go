package pgstate

import "github.com/edgesecrets/edgesecrets/agreement/delivery"

// ErrBadInput exposes the error of a name PostgreSQL text cannot hold to
// the external tests.
var ErrBadInput = errBadInput

// SchemaOf returns the PostgreSQL schema holding the tables of st, a
// State Open returned.
func SchemaOf(st delivery.State) string { return st.(*state).schema }

// Versions returns the schema versions the migrations make, 1 to the
// latest, in order.
func Versions() []int {
	vs := make([]int, len(migrations))
	for i := range vs {
		vs[i] = i + 1
	}
	return vs
}
