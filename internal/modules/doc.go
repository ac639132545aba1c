// Package modules has no code: its tests hold the repository's Go modules
// to the rules that let other projects depend on them (docs/releasing.md):
// no published go.mod has a replace directive, no non-test file imports
// another module's internal packages, and go.work and the Makefile list
// every module.
package modules
