package authz_test

import (
	"context"
	"testing"

	"github.com/agentbot/agentbot/core/authz"
)

func TestMayUseAgent(t *testing.T) {
	t.Parallel()
	dir := fakeDir{members: map[string]authz.Member{"dev": {Roles: []string{"r-dev"}}, "admin": {ManageGuild: true}, "plain": {}}}
	a := authz.New(authz.Config{}, dir)
	tests := []struct {
		name         string
		users, roles []string
		actor        authz.Actor
		want         bool
	}{
		{"Manage Server, lists empty: no power over the host", nil, nil, authz.Actor{UserID: "admin", Where: conv("c1")}, false},
		{"plain member, lists empty = operators only", nil, nil, authz.Actor{UserID: "plain", Where: conv("c1")}, false},
		{"listed user", []string{"plain"}, nil, authz.Actor{UserID: "plain", Where: conv("c1")}, true},
		{"listed role", nil, []string{"r-dev"}, authz.Actor{UserID: "dev", Where: conv("c1")}, true},
		{"role does not count in a DM", nil, []string{"r-dev"}, authz.Actor{UserID: "dev", Where: conv("user:dev")}, false},
		{"other role", nil, []string{"r-ops"}, authz.Actor{UserID: "dev", Where: conv("c1")}, false},
		{"no user", []string{""}, nil, authz.Actor{Where: conv("c1")}, false},
	}
	for _, tt := range tests {
		err := a.MayUseAgent(context.Background(), tt.actor, tt.users, tt.roles, "start gemini")
		if got := err == nil; got != tt.want {
			t.Errorf("%s: allowed=%v (%v), want %v", tt.name, got, err, tt.want)
		}
		if err != nil && !authz.IsRefusal(err) {
			t.Errorf("%s: %v is not a refusal", tt.name, err)
		}
	}
}
