// Package arch holds the architecture as a test: every "never" of DESIGN.md §2 is a row of arch_test.go with its
// reason, checked against `go list` of the whole module, and every package must carry a doc comment. It has no
// code of its own.
package arch
