package config

import (
	"slices"
	"testing"
)

func TestSecrets(t *testing.T) {
	for _, tt := range []struct{ dsn, pw string }{
		{"postgres://bot:s3cr%2Fet-pw@db:5432/x", "s3cr/et-pw"},
		{"postgres://db/x?password=q-secret-pw", "q-secret-pw"},
		{"host=db user=bot password='kw secret' dbname=x", "kw secret"},
		{"host=db password=plainsecret", "plainsecret"},
		{"postgres://db/x", ""},
	} {
		c := Default()
		c.Discord.Token = "bot-token"
		c.Store.DSN = tt.dsn
		got := c.Secrets()
		if !slices.Contains(got, "bot-token") || !slices.Contains(got, tt.dsn) {
			t.Errorf("%q: Secrets() = %q, want the token and the DSN", tt.dsn, got)
		}
		if tt.pw != "" && !slices.Contains(got, tt.pw) {
			t.Errorf("%q: Secrets() = %q, want the password %q", tt.dsn, got, tt.pw)
		}
	}
}
