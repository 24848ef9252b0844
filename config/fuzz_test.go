package config

import (
	"errors"
	"os"
	"strings"
	"testing"
	"unicode/utf8"
)

// fuzzSecret is the value of every secret in a fuzzed config: "$SECRET" in
// the input and ${DISCORD_TOKEN} / ${OPENAI_API_KEY} / ${DATABASE_URL}
// expand to it.
const fuzzSecret = "Zq7xK9secretVALUE42w"

// FuzzLoadBytes: no input panics the decoder; every refusal is an *Error
// wrapping ErrInvalid that names a key or a line, reads as one message,
// and never echoes a secret (a token, an API key or a DSN).
func FuzzLoadBytes(f *testing.F) {
	if example, err := os.ReadFile("../config.example.yaml"); err == nil {
		f.Add(example)
	}
	for _, s := range []string{
		"", "{}", "---\n", "null", "[]", "discord: 1", "discord:\n  token: $SECRET\n",
		"discord:\n  token: ${DISCORD_TOKEN}\n  guilds: [1, 2]\n", "discord:\n  tokne: x\n",
		"discord:\n  threadBindings:\n    idleHours: -1\n", "discord:\n  threadBindings:\n    idleHours: 1e400\n",
		"models:\n  default:\n    provider: openai\n    apiKey: $SECRET\n    model: 7\n",
		"models:\n  default: {provider: openai, apiKey: \"${OPENAI_API_KEY}\", model: m, timeout: 90x}\n",
		"agents:\n  - id: main\n    model: nope\n  - id: main\n",
		"store:\n  driver: postgres\n  dsn: postgres://bot:$SECRET@db/x\n  path: $SECRET\n",
		"store:\n  driver: postgres\n  dsn: ${DATABASE_URL}\n",
		"http:\n  listen: 0.0.0.0:8080\n  token: $SECRET\n", "scheduler:\n  timezone: Mars/Olympus\n",
		"discord:\n\ttoken: x\n", "a: b\n---\nc: d\n", "discord: &a\n  token: *a\n", "x: ${UNSET_VAR:-}\n",
		"discord:\n  shard: {id: 3, count: 2}\n", "log:\n  level: loud\n", "discord: {token: $SECRET, apiURL: $SECRET}\n",
		"! !\n", "? [a]\n: b\n", "discord:\n  operators:\n    users: [\"$SECRET\"]\n",
	} {
		f.Add([]byte(s))
	}
	env := func(name string) (string, bool) {
		switch name {
		case "DISCORD_TOKEN", "OPENAI_API_KEY", "DATABASE_URL":
			return fuzzSecret, true
		}
		return "", false
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in := strings.ReplaceAll(string(data), "$SECRET", fuzzSecret)
		_, err := LoadBytes("config.yaml", []byte(in), env)
		if err == nil {
			return
		}
		var ce *Error
		if !errors.As(err, &ce) || !errors.Is(err, ErrInvalid) {
			t.Fatalf("error %T %v is not a config *Error wrapping ErrInvalid", err, err)
		}
		// yaml.v3 does not always say where a syntax error is; every
		// other refusal points at a key or a line.
		if ce.Key == "" && ce.Line == 0 && !strings.HasPrefix(ce.Msg, "YAML syntax error") {
			t.Fatalf("error names neither a key nor a line: %v", err)
		}
		msg := err.Error()
		if strings.TrimSpace(ce.Msg) == "" || !utf8.ValidString(msg) {
			t.Fatalf("unreadable error %q", msg)
		}
		// fuzzSecret is a secret when a token, apiKey or dsn key holds it
		// (elsewhere, e.g. as a user id, it is an ordinary value).
		if root, perr := parse("config.yaml", []byte(in)); perr == nil && root != nil && strings.Contains(msg, fuzzSecret) {
			for _, s := range collectSecrets(root, env) {
				if strings.Contains(s, fuzzSecret) {
					t.Fatalf("error echoes a secret: %v", err)
				}
			}
		}
	})
}
