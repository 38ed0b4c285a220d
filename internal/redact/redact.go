// Package redact prints the module's structs that hold secret values.
package redact

import "fmt"

// Format is the Format method of a struct whose secret fields redact
// themselves (edgesecrets.Data, edgesecrets.Sensitive): it prints v, the
// struct converted to a local type without methods, as %v does (%+v with
// the + or # flag) whatever the verb, so that fmt calls the fields' own
// methods.
//
// The struct needs the method even though its fields redact themselves:
// fmt prints a pointer to it that it meets inside another value with %s or
// %q through its error path ("%!s(*T=&{...})"), which calls no method of
// any field and prints every value raw. A Format method of the struct is
// found before that path is taken.
func Format(f fmt.State, v any) {
	format := "%v"
	if f.Flag('+') || f.Flag('#') {
		format = "%+v"
	}
	_, _ = fmt.Fprintf(f, format, v) // fmt.State buffers in memory; Format has no error to return
}
