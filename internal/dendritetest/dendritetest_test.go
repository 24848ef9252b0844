package dendritetest

import (
	"encoding/json"
	"net/http"
	"testing"
)

// The server starts, registers users by shared secret (admin and not), answers whoami with their tokens, and
// comes back after Restart with its accounts.
func TestStartRegisterRestart(t *testing.T) {
	s := Start(t, Options{AppService: &AppService{ID: "agentbot", ASToken: "as-secret", HSToken: "hs-secret", SenderLocalpart: "agentbot-as", UserPrefix: "agentbot_"}})
	alice := s.Register(t, "alice", true)
	bob := s.Register(t, "bob", false)
	if alice.UserID != "@alice:localhost" || bob.UserID != "@bob:localhost" {
		t.Fatalf("user ids = %q, %q", alice.UserID, bob.UserID)
	}
	whoami := func(u User) string {
		req, _ := http.NewRequest(http.MethodGet, s.URL+"/_matrix/client/v3/account/whoami", nil)
		req.Header.Set("Authorization", "Bearer "+u.AccessToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var w struct {
			UserID string `json:"user_id"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&w)
		return w.UserID
	}
	if got := whoami(bob); got != bob.UserID {
		t.Fatalf("whoami = %q, want %q", got, bob.UserID)
	}
	s.Restart(t)
	if got := whoami(alice); got != alice.UserID {
		t.Fatalf("after restart whoami = %q, want %q", got, alice.UserID)
	}
	// The same localpart cannot be registered twice.
	if _, err := s.register("alice", false); err == nil {
		t.Fatal("second registration of alice succeeded")
	}
}
