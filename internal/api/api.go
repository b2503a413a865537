// Package api holds the types that cross the daemon's boundary: the control
// socket's JSON (`status --json`, `explain --json`, the answers to pause,
// pin, resume, unpin and roll) and the per-tick report the Prometheus
// metrics read. The controller builds these values; control, metrics and the
// command line read them without importing the controller, so that its
// internal structs can change without changing what scripts read.
//
// The JSON names are stable: docs/operations.md documents them and scripts read
// them. internal/control's golden files (testdata/wire) pin every field.
//
// The package has no logic beyond copying and printing its values, and
// imports nothing of the project's, so that any package may import it.
package api
