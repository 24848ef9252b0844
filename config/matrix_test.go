package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMatrixConfig(t *testing.T) {
	t.Parallel()
	env := envOf(map[string]string{"MATRIX_TOKEN": "syt_secret_token_value", "MATRIX_AS_TOKEN": "as_secret_token_value"})
	good := "matrix:\n  homeserver: https://matrix.example.org\n  userId: \"@agentbot:example.org\"\n  accessToken: ${MATRIX_TOKEN}\n" +
		"  appservice: {asToken: \"${MATRIX_AS_TOKEN}\", userPrefix: agentbot_, senderLocalpart: agentbot}\n  operators: [\"@admin:example.org\"]\n"
	cfg, err := LoadBytes("t.yaml", []byte(good), env)
	if err != nil {
		t.Fatal(err)
	}
	m := cfg.Matrix
	if !m.Enabled() || m.AccessToken != "syt_secret_token_value" || m.ServerName() != "example.org" ||
		m.SyncTokenFile != "data/matrix-sync.token" || m.SyncTimeout != 30*time.Second {
		t.Errorf("decoded %+v", m)
	}
	secrets := cfg.Secrets()
	for _, s := range []string{"syt_secret_token_value", "as_secret_token_value"} {
		if !slices.Contains(secrets, s) {
			t.Errorf("secrets %q lack %q", secrets, s)
		}
	}
	if off, err := LoadBytes("t.yaml", []byte("matrix: {}\n"), env); err != nil || off.Matrix.Enabled() {
		t.Errorf("an empty matrix section: enabled %v, err %v", off.Matrix.Enabled(), err)
	}
	base := "matrix:\n  homeserver: https://matrix.example.org\n  userId: \"@agentbot:example.org\"\n"
	cases := []struct{ name, yaml, want string }{
		{"unknown key", base + "  accessToken: t\n  acessToken: x\n", "matrix.acessToken"},
		{"no token", base, "matrix.accessToken: is required"},
		{"bad user", "matrix:\n  homeserver: https://m.example.org\n  userId: agentbot\n  accessToken: t\n", "matrix.userId: \"agentbot\" is not a Matrix user id"},
		{"bad url", "matrix:\n  homeserver: matrix.example.org\n  userId: \"@a:b\"\n  accessToken: t\n", "matrix.homeserver"},
		{"half appservice", base + "  accessToken: t\n  appservice: {userPrefix: x_}\n", "matrix.appservice.asToken: is required"},
		{"bad operator", base + "  accessToken: t\n  operators: [admin]\n", "matrix.operators: entry 1"},
		{"no sync timeout", base + "  accessToken: t\n  syncTimeout: 0s\n", "matrix.syncTimeout: must be positive"},
	}
	for _, c := range cases {
		_, err := LoadBytes("t.yaml", []byte(c.yaml), env)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want it to contain %q", c.name, err, c.want)
		}
	}
	// Matrix only: no Discord token is needed to run; without either, the Discord token is asked for.
	if err := cfg.ValidateForRun(); err != nil || cfg.DiscordOn() {
		t.Errorf("a Matrix-only config: ValidateForRun %v, DiscordOn %v; want valid, Discord off", err, cfg.DiscordOn())
	}
	if none, _ := LoadBytes("t.yaml", []byte("store: {path: x.db}\n"), env); none.ValidateForRun() == nil || !none.DiscordOn() {
		t.Error("a config on no platform: want ValidateForRun to ask for the Discord token")
	}
	// A bad file never echoes the secret.
	_, err = LoadBytes("t.yaml", []byte(base+"  accessToken: \"${MATRIX_TOKEN} x\"\n"), env)
	if err == nil || strings.Contains(err.Error(), "syt_secret_token_value") {
		t.Errorf("err %v: want a refusal without the token", err)
	}
}
