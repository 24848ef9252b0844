// Package mcp gives agents the tools of Model Context Protocol servers,
// through the official Go SDK (github.com/modelcontextprotocol/go-sdk).
//
// A Hub holds one supervised client session per configured server: all are
// started when Run starts (eager), a server that exits or fails to start is
// restarted with exponential backoff, its tools are withdrawn while it is
// down, and one that keeps failing is reported (Status, logs, the Observer's
// metrics). A server's tool list is fetched again on
// notifications/tools/list_changed.
//
// The turn runner (core/session) consumes a Hub through a small interface of
// its own: Tools lists what an agent may use for the acting user (a server's
// users/roles/operators grant is decided by core/authz), with names
// <server>__<tool> within the providers' rule ^[a-zA-Z0-9_-]{1,64}$ and the
// server's JSON schemas passed through; Call runs one with the server's
// timeout and returns text capped at the server's result size (images and
// resources summarised). A tool's own error (isError) is a result the model
// reads; a failed call is an error whose text never holds a configured env or
// header value.
package mcp
