// Package binarykey holds the one marker the Vault and AWS backends write
// into a stored secret for values that are not valid UTF-8, which a JSON
// string cannot hold. Each backend documents how it uses it: Vault writes
// such a value as the object {"edgesecrets:base64": "<base64>"}, AWS lists
// the keys of such values in a SecretString member of that name.
package binarykey

// Marker is the reserved JSON member name that marks base64-encoded
// (standard alphabet) values. It is part of the stored format: changing it
// makes existing binary secrets unreadable.
const Marker = "edgesecrets:base64"
