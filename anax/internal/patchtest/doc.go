// Package patchtest tests anax/patches against Open Horizon's anax: that the
// patches apply cleanly to the pristine tree, that the patched agbot picks its
// secrets plugin by name, and which dependency versions the combined build
// (anax with edgesecrets) raises over anax's own go.mod.
//
// The tests need the workspace scripts/devanax.sh makes (GOWORK set to
// EDGESECRETS_ANAX_WORK, EDGESECRETS_ANAX_SRC naming the patched copy).
package patchtest
