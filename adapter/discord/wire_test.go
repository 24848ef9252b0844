package discord

import (
	"testing"

	"github.com/agentbot/agentbot/core/authz"
)

// newTestClient returns a Client (see NewClient), failing the test on error.
func newTestClient(t testing.TB, opt ClientOptions, d ClientDeps) *Client {
	t.Helper()
	c, err := NewClient(opt, d)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// wire returns a Client and a Gateway over it, as cmd/bot wires them
// (the authority over the Client's directory, no operators, unless d has one).
func wire(t testing.TB, co ClientOptions, cd ClientDeps, opt GatewayOptions, d GatewayDeps) (*Client, *Gateway) {
	t.Helper()
	c := newTestClient(t, co, cd)
	d.Client = c
	if d.Authority == nil {
		d.Authority = authz.New(authz.Config{}, c)
	}
	return c, NewGateway(opt, d)
}
