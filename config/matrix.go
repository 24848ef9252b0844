package config

import (
	"strings"
	"time"
)

// MatrixConfig is the matrix section: the bot on a Matrix homeserver, beside (or instead of) Discord. It is
// off while homeserver is empty.
type MatrixConfig struct {
	Homeserver string `yaml:"homeserver"` // client-server API base, e.g. https://matrix.example.org
	UserID     string `yaml:"userId"`     // the bot account, e.g. "@agentbot:example.org"
	// AccessToken is the bot account's (a secret: use ${MATRIX_TOKEN}; never logged).
	AccessToken string `yaml:"accessToken"`
	// AppService, when its asToken is set, posts personas as appservice ghosts; without it a persona's
	// name prefixes the text.
	AppService MatrixAppServiceConfig `yaml:"appservice"`
	// Operators are Matrix user ids with operator rights (as discord.operators.users); empty = room
	// members with power level 100 in the room they act in.
	Operators []string `yaml:"operators"`
	// SyncTokenFile keeps the /sync position across restarts (catch-up after downtime resumes from it).
	SyncTokenFile string `yaml:"syncTokenFile"`
	// SyncTimeout is the long-poll timeout of /sync.
	SyncTimeout time.Duration `yaml:"syncTimeout"`
}

// MatrixAppServiceConfig is the bot's appservice registration (see the README's Matrix section).
type MatrixAppServiceConfig struct {
	ASToken         string `yaml:"asToken"`         // the registration's as_token (a secret)
	UserPrefix      string `yaml:"userPrefix"`      // persona ghosts are @<userPrefix><name>:<server>
	SenderLocalpart string `yaml:"senderLocalpart"` // the registration's sender_localpart
}

// Enabled reports whether the bot runs on Matrix.
func (m MatrixConfig) Enabled() bool { return strings.TrimSpace(m.Homeserver) != "" }

// DiscordOn reports whether the bot runs on Discord: always, unless its
// token is empty and the matrix section is on (a Matrix-only bot).
func (c *Config) DiscordOn() bool {
	return strings.TrimSpace(c.Discord.Token) != "" || !c.Matrix.Enabled()
}

// ServerName is the homeserver name of the bot's user id ("example.org" of "@agentbot:example.org").
func (m MatrixConfig) ServerName() string {
	_, server, _ := strings.Cut(m.UserID, ":")
	return server
}

func defaultMatrix() MatrixConfig {
	return MatrixConfig{SyncTokenFile: "data/matrix-sync.token", SyncTimeout: 30 * time.Second}
}

// validateMatrix checks the matrix section when it is on: a URL, a user id, a token, and a whole
// appservice registration or none.
func (c *Config) validateMatrix() *Error {
	m := c.Matrix
	if !m.Enabled() {
		return nil
	}
	if err := c.checkURL("matrix.homeserver", m.Homeserver, "https://matrix.example.org"); err != nil {
		return err
	}
	if !validMatrixUser(m.UserID) {
		return c.src.errAt("matrix.userId", "%s is not a Matrix user id: write it whole, e.g. \"@agentbot:example.org\" (quoted: YAML reads @ specially)", show(m.UserID))
	}
	if strings.TrimSpace(m.AccessToken) == "" {
		return c.src.errAt("matrix.accessToken", "is required with matrix.homeserver%s: the bot account's access token, e.g. ${MATRIX_TOKEN}", c.src.unsetHint("matrix.accessToken"))
	}
	if strings.ContainsAny(m.AccessToken, " \t\r\n") {
		return c.src.errAt("matrix.accessToken", "contains whitespace; copy the token again")
	}
	as := m.AppService
	if as.ASToken != "" || as.UserPrefix != "" || as.SenderLocalpart != "" {
		switch {
		case strings.TrimSpace(as.ASToken) == "":
			return c.src.errAt("matrix.appservice.asToken", "is required with the other appservice keys%s: the registration's as_token, e.g. ${MATRIX_AS_TOKEN}", c.src.unsetHint("matrix.appservice.asToken"))
		case as.UserPrefix == "":
			return c.src.errAt("matrix.appservice.userPrefix", "is required with an appservice: the prefix of its exclusive user namespace, e.g. agentbot_")
		case as.SenderLocalpart == "":
			return c.src.errAt("matrix.appservice.senderLocalpart", "is required with an appservice: the registration's sender_localpart, e.g. agentbot")
		}
	}
	for i, u := range m.Operators {
		if !validMatrixUser(u) {
			return c.src.errAt("matrix.operators", "entry %d, %s, is not a Matrix user id, e.g. \"@admin:example.org\"", i+1, show(u))
		}
	}
	if strings.TrimSpace(m.SyncTokenFile) == "" {
		return c.src.errAt("matrix.syncTokenFile", "must not be empty: a file that keeps the /sync position, e.g. data/matrix-sync.token")
	}
	if m.SyncTimeout <= 0 {
		return c.src.errAt("matrix.syncTimeout", "must be positive, e.g. 30s")
	}
	return nil
}

// validMatrixUser: @localpart:server, both parts non-empty, no whitespace.
func validMatrixUser(s string) bool {
	local, server, ok := strings.Cut(strings.TrimPrefix(s, "@"), ":")
	return strings.HasPrefix(s, "@") && ok && local != "" && server != "" && !strings.ContainsAny(s, " \t\r\n")
}
