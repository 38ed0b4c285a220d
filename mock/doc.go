// Package mock holds test doubles for programs that embed edgesecrets, so
// their unit tests run without a Vault server, an AWS account or an edge node.
//
// [Store] is a *secretstore.Store (its Store field) over any other (an
// in-memory one by default). It records every call that reaches it
// ([Store.Calls] lists and, with len, counts them per operation and per
// secret name) and injects the [Faults] set with [Store.SetFaults]: the
// next N calls of an operation, or every call, fail with a given error
// kind (edgesecrets.ErrUnavailable for a store that is down); calls take an
// added latency (cut short when the caller's context ends); a hook can
// block or fail single calls; reads can hide versions. Use it to check
// that code handles failures, reports ErrUnavailable distinctly from
// ErrNotFound, or reads the store no more often than it should.
//
// The package also provides a development agent, [DevAgent], that serves
// the service-facing secrets API from local files, so a service container
// can be developed against it without an agreement bot.
//
// Everything here is for tests and development: faults are injected on
// purpose, and no value passed through these doubles is printed or logged.
package mock
