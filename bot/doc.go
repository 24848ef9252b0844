// Package bot is the application: New takes the options and dependencies
// and does no I/O; Run opens the store, builds every component over it in
// one direction (the platforms' clients, the send owner, the sessions, the
// commands, the platforms' inbound sides), closes Started, and runs them
// under one errgroup until its context ends, releasing what it opened when
// it returns. cmd/bot keeps the flags and subcommands; tests and tools
// build the application through this package.
//
// Invariants held here (tests in this package):
//   - New opens nothing (TestNewOpensNothing); the components are read
//     only after Started is closed, which happens-before every read.
//   - Shutdown order: the adapters and the scheduler stop taking work and
//     finish what they accepted; then the sessions drain; then bindings
//     flush their last activity; the store closes last.
//   - A previous run's deliveries are recovered, and its turns resumed,
//     before the Matrix /sync loop starts and before the scheduler runs.
//   - With several processes on one PostgreSQL store, exactly one (the
//     leader) runs the scheduler and the outbox's recovery loop.
package bot
