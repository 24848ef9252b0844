package discordtest_test

import (
	"testing"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
)

// TestSetTokensIsAReset: after SetTokens only the new token works: REST
// with the old one is 401, IDENTIFY with it is closed with 4004 (and
// counted); the new token identifies.
func TestSetTokensIsAReset(t *testing.T) {
	t.Parallel()
	e := discordtest.NewTest(t, discordtest.Options{})
	old := restSession(t, e) // built with the old token
	e.SetTokens("fresh-token")
	if e.Token() != "fresh-token" {
		t.Fatalf("Token() = %q", e.Token())
	}
	if _, err := old.User("@me"); err == nil {
		t.Fatal("REST with the old token accepted")
	} else if status, _ := restCode(t, err); status != 401 {
		t.Fatalf("REST with the old token: %d", status)
	}
	old.ShouldReconnectOnError = false
	if err := old.Open(); err == nil {
		_ = old.Close()
		t.Fatal("IDENTIFY with the old token accepted")
	}
	if st := e.GatewayStats(); st.AuthFailures != 1 || st.Identifies != 0 {
		t.Fatalf("stats %+v", st)
	}
	openSession(t, e, nil) // built with Token(): the new one
	if st := e.GatewayStats(); st.Identifies != 1 || st.AuthFailures != 1 {
		t.Fatalf("stats %+v", st)
	}
}
