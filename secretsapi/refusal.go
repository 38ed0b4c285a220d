package secretsapi

import (
	"strings"
)

// No text the handler sends holds a percent sign: hzn passes an answer's
// text to a printf as its format (cli/cliutils/cliutils.go, Fatal), where
// "%2F" is a verb and prints as "%!F(MISSING)". Escapes in a request path
// are described in words; a percent sign in a name, organisation or
// method a text quotes is written as \u0025, its escape in a JSON or Go
// string.

// percentEscape is what a percent sign becomes in a refusal text.
const percentEscape = `\u0025`

// refusalText returns s without a percent sign (percentEscape in its
// place).
func refusalText(s string) string {
	return strings.ReplaceAll(s, "%", percentEscape)
}

// pathProblem is the text of a non-canonical path's refusal, from the
// check's error (internal/reqpath words its escapes), without a percent sign.
func pathProblem(err error) string {
	return refusalText(err.Error())
}

// refusalError is a parse error whose text has no percent sign; it
// unwraps to the error it stands for.
type refusalError struct{ err error }

func (e refusalError) Error() string { return refusalText(e.err.Error()) }
func (e refusalError) Unwrap() error { return e.err }
