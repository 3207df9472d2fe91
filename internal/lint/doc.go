// Package lint holds repository-wide checks that run as ordinary tests.
//
// Its test enforces the dependency directions of DESIGN.md's package map:
// it lists every package of the module with one `go list` call and checks
// each package's imports, direct and transitive, against a table of rules.
// To add a direction, add a row to the rules table in lint_test.go.
//
// The package has no non-test code.
package lint
