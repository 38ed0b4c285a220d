// Package hzncheck holds tests only: the library's own secrets-manager API
// (package secretsapi, what an edgesecrets agbot serves) driven by Open
// Horizon's real hzn CLI, for the answers hzn prints.
package hzncheck
