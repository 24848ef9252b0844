package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// envOf returns a lookup over a fixed map, so tests never read the process environment.
func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func load(t *testing.T, yaml string, env map[string]string) (*Config, error) {
	t.Helper()
	return LoadBytes("test.yaml", []byte(yaml), envOf(env))
}

func mustLoad(t *testing.T, yaml string, env map[string]string) *Config {
	t.Helper()
	cfg, err := load(t, yaml, env)
	if err != nil {
		t.Fatalf("LoadBytes: %v", err)
	}
	return cfg
}

func TestBadConfigs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		want string // exact part of the message
	}{
		{"unknown top-level key", "discrod:\n  token: x\n",
			nil, `test.yaml:1: discrod: unknown key (did you mean "discord"?)`},
		{"unknown nested key", "discord:\n  threadBinding:\n    enabled: true\n",
			nil, `test.yaml:2: discord.threadBinding: unknown key (did you mean "threadBindings"?); the keys allowed under discord are: token, apiURL, guilds, operators, access, edits, threadBindings, shard`},
		{"unknown key in list item", "agents:\n  - id: a\n    prompt: hi\n",
			nil, `test.yaml:3: agents[0].prompt: unknown key`},
		{"negative idleHours", "discord:\n  threadBindings:\n    enabled: true\n    idleHours: -1\n",
			nil, "test.yaml:4: discord.threadBindings.idleHours: must be 0 or more"},
		{"negative maxAgeHours", "discord:\n  threadBindings: {maxAgeHours: -2}\n",
			nil, "test.yaml:2: discord.threadBindings.maxAgeHours: must be 0 or more"},
		{"idleHours not a number", "discord:\n  threadBindings:\n    idleHours: a day\n",
			nil, `test.yaml:3: discord.threadBindings.idleHours: expected a number (e.g. 24 or 0.5), got "a day"`},
		{"bool as yes", "scheduler:\n  enabled: yes\n",
			nil, `test.yaml:2: scheduler.enabled: expected true or false, got "yes"`},
		{"guild id too short", "discord:\n  guilds: [\"12345\"]\n",
			nil, `test.yaml:2: discord.guilds[0]: "12345" is not a Discord id (17-20 digits)`},
		{"guilds not a list", "discord:\n  guilds: 123456789012345678\n",
			nil, "test.yaml:2: discord.guilds: expected a list"},
		{"operator role not digits", "discord:\n  operators:\n    roles:\n      - moderators\n",
			nil, `test.yaml:4: discord.operators.roles[0]: "moderators" is not a Discord id`},
		{"edits mode", "discord:\n  edits: reanswer\n",
			nil, `test.yaml:2: discord.edits: must be history (the model sees an edited message's new text next time) or reprocess (an edited message addressed to the bot is answered again), got "reanswer"`},
		{"edits empty", "discord:\n  edits: \"\"\n",
			nil, `test.yaml:2: discord.edits: must be history`},
		{"access unknown key", "discord:\n  access:\n    allowed: {users: []}\n",
			nil, `test.yaml:3: discord.access.allowed: unknown key (did you mean "allow"?)`},
		{"access dm mode", "discord:\n  access: {dm: everyone}\n",
			nil, `test.yaml:2: discord.access.dm: must be off, allowlist (only allow.users) or members`},
		{"access dm allowlist empty", "discord:\n  access: {dm: allowlist}\n",
			nil, `discord.access.dm: is allowlist but discord.access.allow.users is empty`},
		{"access deny role not an id", "discord:\n  access:\n    deny: {roles: [mods]}\n",
			nil, `test.yaml:3: discord.access.deny.roles[0]: "mods" is not a Discord id`},
		{"access rateLimit unknown key", "discord:\n  access:\n    rateLimit: {turns: 5, window: 1h}\n",
			nil, `test.yaml:3: discord.access.rateLimit.window: unknown key`},
		{"access rateLimit negative", "discord:\n  access:\n    rateLimit: {turns: -1}\n",
			nil, `test.yaml:3: discord.access.rateLimit.turns: must be 0 (no per-user limit) or more, got -1`},
		{"access rateLimit per too short", "discord:\n  access:\n    rateLimit: {turns: 5, per: 0s}\n",
			nil, `test.yaml:3: discord.access.rateLimit.per: must be a duration of at least 1s`},
		{"access and its alias both set", "access: {dm: off}\ndiscord:\n  access: {dm: off}\n",
			nil, `test.yaml:1: access: and discord.access are both set`},
		{"top-level access dm mode", "access: {dm: everyone}\n",
			nil, `test.yaml:1: access.dm: must be off, allowlist`},
		{"top-level access bad matrix user", "access:\n  allow: {users: [\"@alice\"]}\n",
			nil, `access.allow.users[0]: "@alice" is neither a Discord id`},
		{"audit every too short", "audit:\n  every: 10s\n",
			nil, `test.yaml:2: audit.every: must be 0 (off) or at least 1m0s`},
		{"section is a scalar", "discord: true\n",
			nil, "test.yaml:1: discord: expected a mapping of key: value, got true/false"},
		{"apiURL not http", "discord:\n  apiURL: ftp://example.com\n",
			nil, `test.yaml:2: discord.apiURL: "ftp://example.com" is not an http:// or https:// URL`},
		{"agent id uppercase", "agents:\n  - id: Main\n",
			nil, `test.yaml:2: agents[0].id: "Main" may use only lowercase letters, digits, '_' and '-'`},
		{"agent id missing", "agents:\n  - name: Bob\n",
			nil, "test.yaml:2: agents[0].id: is required"},
		{"agent ids duplicated", "agents:\n  - id: a\n  - id: b\n  - id: a\n",
			nil, `test.yaml:4: agents[2].id: "a" is already the id of agents[0]; agent ids must be unique`},
		{"channel claimed by two agents", "agents:\n  - id: a\n    channels: [\"1\", \"2\"]\n  - id: b\n    channels: [\"3\", \"2\"]\n",
			nil, `test.yaml:5: agents[1].channels[1]: "2" is also in agents[0].channels (agent "a"); an id routes to one agent only`},
		{"channel id empty", "agents:\n  - id: a\n    channels: [\"\"]\n",
			nil, "test.yaml:3: agents[0].channels[0]: is empty"},
		{"channel id a user", "agents:\n  - id: a\n    channels: [\"@bob:example.org\"]\n",
			nil, "direct messages always go to the default agent"},
		{"agent avatar not URL", "agents:\n  - id: a\n    avatarURL: avatar.png\n",
			nil, `test.yaml:3: agents[0].avatarURL: "avatar.png" is not an http:// or https:// URL`},
		{"agent model undefined", "agents:\n  - id: a\n    model: gpt\n",
			nil, `test.yaml:3: agents[0].model: "gpt" is not defined under models; defined models: default`},
		{"default agent model undefined", "models:\n  gpt: {provider: openai, apiKey: k, model: m}\n",
			nil, `agents[0].model: "default" is not defined under models (this is the default agent, used because agents is not set); defined models: gpt`},
		{"empty agents", "agents: []\n",
			nil, "test.yaml:1: agents: at least one agent is required"},
		{"empty models", "models: {}\n",
			nil, "test.yaml:1: models: at least one model is required"},
		{"provider missing", "models:\n  default:\n    model: x\n",
			nil, "test.yaml:2: models.default.provider: is required: one of echo, openai, anthropic"},
		{"provider unknown", "models:\n  default:\n    provider: gemini\n",
			nil, `test.yaml:3: models.default.provider: unknown provider "gemini": use echo, openai or anthropic`},
		{"openai without model", "models:\n  default:\n    provider: openai\n    apiKey: sk-1\n",
			nil, "test.yaml:2: models.default.model: is required for provider openai"},
		{"openai without apiKey from unset env", "models:\n  default:\n    provider: openai\n    model: gpt-4o-mini\n    apiKey: ${OPENAI_API_KEY}\n",
			nil, "test.yaml:5: models.default.apiKey: is required for provider openai (it is empty because the environment variable OPENAI_API_KEY is unset or empty)"},
		{"maxHistory zero", "models:\n  default:\n    provider: echo\n    maxHistory: 0\n",
			nil, "test.yaml:4: models.default.maxHistory: must be between 1 and 1000"},
		{"stream not bool", "models:\n  default:\n    provider: echo\n    stream: sometimes\n",
			nil, `test.yaml:4: models.default.stream: expected true or false, got "sometimes"`},
		{"vision not bool", "models:\n  default:\n    provider: echo\n    vision: maybe\n",
			nil, `test.yaml:4: models.default.vision: expected true or false, got "maybe"`},
		{"fallback undefined", "models:\n  default:\n    provider: echo\n    fallbacks: [backup]\n",
			nil, `test.yaml:4: models.default.fallbacks[0]: "backup" is not defined under models; defined models: default`},
		{"fallback self", "models:\n  default:\n    provider: echo\n    fallbacks: [default]\n",
			nil, "test.yaml:4: models.default.fallbacks[0]: a model cannot be its own fallback"},
		{"budget without a window", "access:\n  budget: {tokens: 1000, per: 0s}\n",
			nil, "test.yaml:2: access.budget.per: must be a duration of at least 1m"},
		{"price negative", "models:\n  default:\n    provider: echo\n    price: {input: -1}\n",
			nil, "test.yaml:4: models.default.price: input and output must be 0 or more"},
		{"maxHistory not int", "models:\n  default:\n    provider: echo\n    maxHistory: 2.5\n",
			nil, `test.yaml:4: models.default.maxHistory: expected a whole number (e.g. 4), got "2.5"`},
		{"timeout without unit", "models:\n  default:\n    provider: echo\n    timeout: 60\n",
			nil, `test.yaml:4: models.default.timeout: "60" is not a duration: write it like "90s", "10m" or "1h30m"`},
		{"runTimeout words", "subagents:\n  runTimeout: 10 minutes\n",
			nil, `test.yaml:2: subagents.runTimeout: "10 minutes" is not a duration: write it like "90s"`},
		{"maxConcurrent zero", "subagents:\n  maxConcurrent: 0\n",
			nil, "test.yaml:2: subagents.maxConcurrent: must be at least 1, got 0"},
		{"maxConcurrent bad from env", "subagents:\n  maxConcurrent: ${N}\n",
			map[string]string{"N": "many"}, `test.yaml:2: subagents.maxConcurrent: expected a whole number (e.g. 4), got "many"`},
		{"bad timezone", "scheduler:\n  timezone: Mars/Olympus\n",
			nil, `test.yaml:2: scheduler.timezone: unknown timezone "Mars/Olympus": use an IANA name such as "UTC" or "Europe/Berlin"`},
		{"failureAlert.after zero", "scheduler:\n  failureAlert:\n    after: 0\n",
			nil, "test.yaml:3: scheduler.failureAlert.after: must be at least 1"},
		{"cooldown bad", "scheduler:\n  failureAlert: {cooldown: hourly}\n",
			nil, `test.yaml:2: scheduler.failureAlert.cooldown: "hourly" is not a duration`},
		{"maxCatchUp zero", "scheduler:\n  maxCatchUp: 0\n",
			nil, "test.yaml:2: scheduler.maxCatchUp: must be between 1 and 1000"},
		{"runRetention zero", "scheduler:\n  runRetention: 0\n",
			nil, "test.yaml:2: scheduler.runRetention: must be at least 1"},
		{"deliveryRetentionDays negative", "store:\n  deliveryRetentionDays: -1\n",
			nil, "test.yaml:2: store.deliveryRetentionDays: must be 0 (keep forever) or more days, got -1"},
		{"postgres without dsn", "store:\n  driver: postgres\n",
			nil, `test.yaml:1: store.dsn: is required with driver postgres, e.g. ${DATABASE_URL} (postgres://user:password@host:5432/agentbot)`},
		{"postgres empty dsn from env", "store:\n  driver: postgres\n  dsn: ${DATABASE_URL}\n",
			map[string]string{"DATABASE_URL": ""}, `test.yaml:3: store.dsn: is required with driver postgres, e.g. ${DATABASE_URL} (postgres://user:password@host:5432/agentbot)`},
		{"unknown driver", "store:\n  driver: sqlite\n",
			nil, `test.yaml:2: store.driver: unknown driver "sqlite"; use "bolt" or "postgres"`},
		{"listen without host:port", "http:\n  listen: 9464\n",
			nil, `test.yaml:2: http.listen: "9464" is not host:port`},
		{"log level", "log:\n  level: verbose\n",
			nil, `test.yaml:2: log.level: unknown level "verbose": use debug, info, warn or error`},
		{"log format", "log:\n  format: xml\n",
			nil, `test.yaml:2: log.format: unknown format "xml": use console or json`},
		{"duplicate key", "log:\n  level: info\n  level: debug\n",
			nil, "test.yaml:3: log.level: defined twice (first on line 2); keep one"},
		{"duplicate model", "models:\n  a: {provider: echo}\n  a: {provider: echo}\n",
			nil, "test.yaml:3: models.a: defined twice (first on line 2)"},
		{"syntax error keeps line", "log:\n  level: info\n    format: json\n",
			nil, "test.yaml:3: YAML syntax error: mapping values are not allowed in this context"},
		{"tabs", "discord:\n\ttoken: x\n",
			nil, "YAML indents with spaces, not tabs"},
		{"second document", "log: {level: info}\n---\nlog: {level: debug}\n",
			nil, "found a second YAML document"},
		{"top level list", "- discord\n",
			nil, "test.yaml:1: the top level must be a mapping of sections"},
		{"unclosed env reference", "discord:\n  token: ${DISCORD_TOKEN\n",
			nil, `test.yaml:2: discord.token: "${" without a closing "}"`},
		{"bad env name", "store:\n  path: ${1X}/bot.db\n",
			nil, `test.yaml:2: store.path: "${1X}" is not a valid environment variable reference`},
		{"empty list item", "discord:\n  guilds:\n    -\n",
			nil, "discord.guilds[0]: empty list item"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := load(t, tc.yaml, tc.env)
			if err == nil {
				t.Fatalf("LoadBytes succeeded; want error containing %q", tc.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error does not wrap ErrInvalid: %v", err)
			}
			var cerr *Error
			if !errors.As(err, &cerr) {
				t.Errorf("error is %T, want *Error", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error\n  %s\nwant it to contain\n  %s", err, tc.want)
			}
		})
	}
}

func TestExampleLoadsAsDefaults(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const token = "example-token"
	cfg, err := LoadBytes("config.example.yaml", data, envOf(map[string]string{"DISCORD_TOKEN": token}))
	if err != nil {
		t.Fatalf("example does not load: %v", err)
	}
	if err := cfg.ValidateForRun(); err != nil {
		t.Fatalf("example with DISCORD_TOKEN set is not runnable: %v", err)
	}
	want := Default()
	want.Discord.Token = token
	cfg.src = nil
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("example differs from Default():\n got %+v\nwant %+v", cfg, want)
	}
}

func TestEmptyFileIsDefaults(t *testing.T) {
	t.Parallel()
	for _, yaml := range []string{"", "# only a comment\n", "---\n"} {
		cfg := mustLoad(t, yaml, nil)
		cfg.src = nil
		if !reflect.DeepEqual(cfg, Default()) {
			t.Errorf("%q: got %+v, want defaults", yaml, cfg)
		}
	}
}

func TestDefaultIsValid(t *testing.T) {
	t.Parallel()
	if err := Default().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestElementDefaults(t *testing.T) {
	t.Parallel()
	cfg := mustLoad(t, `
agents:
  - id: helper
  - id: coder
    name: Coder
    model: local
models:
  default: {provider: echo}
  local:
    provider: openai
    baseURL: http://127.0.0.1:11434/v1
    model: llama3.1
    timeout: 2m
`, nil)
	wantAgents := []AgentConfig{
		{ID: "helper", Name: "helper", SystemPrompt: DefaultSystemPrompt, Model: "default"},
		{ID: "coder", Name: "Coder", SystemPrompt: DefaultSystemPrompt, Model: "local"},
	}
	if !reflect.DeepEqual(cfg.Agents, wantAgents) {
		t.Errorf("agents = %+v, want %+v", cfg.Agents, wantAgents)
	}
	wantLocal := ModelConfig{Provider: ProviderOpenAI, BaseURL: "http://127.0.0.1:11434/v1", Model: "llama3.1",
		MaxHistory: 50, Timeout: 2 * time.Minute, MaxToolSteps: 4}
	if got := cfg.Models["local"]; !reflect.DeepEqual(got, wantLocal) {
		t.Errorf("models.local = %+v, want %+v (no apiKey needed with baseURL)", got, wantLocal)
	}
	if got := cfg.DefaultAgent().ID; got != "helper" {
		t.Errorf("DefaultAgent = %q, want the first agent", got)
	}
	if a, ok := cfg.Agent("coder"); !ok || a.Name != "Coder" {
		t.Errorf("Agent(coder) = %+v, %v", a, ok)
	}
	if _, ok := cfg.Agent("nobody"); ok {
		t.Error("Agent(nobody) found")
	}
	// A section given partly keeps the defaults of the keys it leaves out.
	cfg = mustLoad(t, "scheduler:\n  timezone: Europe/Berlin\nhttp:\n  listen: \"\"\n", nil)
	if s := cfg.Scheduler; !s.Enabled || !s.CatchUpMissed || s.MaxCatchUp != 1 || s.FailureAlert.After != 2 ||
		s.FailureAlert.Cooldown != time.Hour || s.RunRetention != 50 {
		t.Errorf("scheduler defaults lost: %+v", s)
	}
	if cfg.Scheduler.Location().String() != "Europe/Berlin" {
		t.Errorf("Location = %v", cfg.Scheduler.Location())
	}
	if cfg.HTTP.Enabled() {
		t.Error(`http.listen: "" must disable the server`)
	}
}

func TestValues(t *testing.T) {
	t.Parallel()
	cfg := mustLoad(t, `
discord:
  apiURL: http://127.0.0.1:8080/api/v10
  guilds: [123456789012345678, "98765432109876543210"]
  operators:
    users: [12345678901234567890]
  threadBindings:
    enabled: false
    spawnSubagentSessions: true
    idleHours: 1.5
    maxAgeHours: 48
subagents: {maxConcurrent: 2, runTimeout: 1h30m}
log: {level: debug, format: json}
`, nil)
	d := cfg.Discord
	// Unquoted ids stay exact, even beyond int64.
	if !reflect.DeepEqual(d.Guilds, []string{"123456789012345678", "98765432109876543210"}) ||
		!reflect.DeepEqual(d.Operators.Users, []string{"12345678901234567890"}) {
		t.Errorf("ids = %v / %v", d.Guilds, d.Operators.Users)
	}
	if a := d.Access; a.DM != DMMembers || a.RateLimit != (RateLimitConfig{Turns: 20, Per: time.Hour, GuildTurns: 200}) {
		t.Errorf("access defaults = %+v, want dm members and 20 turns per user, 200 per guild, per 1h", a)
	}
	tb := d.ThreadBindings
	if tb.Enabled || !tb.SpawnSubagentSessions || tb.IdleTimeout() != 90*time.Minute || tb.MaxAge() != 48*time.Hour {
		t.Errorf("threadBindings = %+v idle=%v maxAge=%v", tb, tb.IdleTimeout(), tb.MaxAge())
	}
	if cfg.Subagents.RunTimeout != 90*time.Minute || cfg.Subagents.MaxConcurrent != 2 {
		t.Errorf("subagents = %+v", cfg.Subagents)
	}
	if cfg.Log != (LogConfig{Level: "debug", Format: "json"}) {
		t.Errorf("log = %+v", cfg.Log)
	}
	if got := (ThreadBindingsConfig{}).IdleTimeout(); got != 0 {
		t.Errorf("zero idleHours = %v, want 0 (disabled)", got)
	}
}

func TestEnvExpansion(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"DISCORD_TOKEN": "tok",
		"IDLE":          "2.5",
		"EMPTY":         "",
		"DIR":           "/var/lib/bot",
		"PROMPT":        "a: b\n- c\n{d}",
	}
	cfg := mustLoad(t, `
discord:
  token: ${DISCORD_TOKEN}
  threadBindings:
    idleHours: ${IDLE}
    maxAgeHours: ${UNSET}
agents:
  - id: main
    systemPrompt: "${PROMPT}"
    name: ${EMPTY:-Fallback} ${UNSET:-Bot}
store:
  path: ${DIR}/bot.db
log:
  level: ${LOG_LEVEL:-warn}
http:
  token: pa$$word $HOME $${LITERAL}
`, env)
	if cfg.Discord.Token != "tok" {
		t.Errorf("token = %q", cfg.Discord.Token)
	}
	if cfg.Discord.ThreadBindings.IdleHours != 2.5 {
		t.Errorf("idleHours = %v, want 2.5 (a number from the environment)", cfg.Discord.ThreadBindings.IdleHours)
	}
	if cfg.Discord.ThreadBindings.MaxAgeHours != 0 {
		t.Errorf("maxAgeHours from unset var = %v, want the default 0", cfg.Discord.ThreadBindings.MaxAgeHours)
	}
	if a := cfg.Agents[0]; a.SystemPrompt != env["PROMPT"] || a.Name != "Fallback Bot" {
		t.Errorf("agent = %+v; an expanded value must stay one string", a)
	}
	if cfg.Store.Path != "/var/lib/bot/bot.db" || cfg.Log.Level != "warn" {
		t.Errorf("store.path = %q, log.level = %q", cfg.Store.Path, cfg.Log.Level)
	}
	if cfg.HTTP.Token != "pa$$word $HOME ${LITERAL}" {
		t.Errorf("http.token = %q: only ${...} expands, $${ is a literal ${", cfg.HTTP.Token)
	}
	// An unset timezone variable falls back to the default.
	cfg = mustLoad(t, "scheduler:\n  timezone: ${TZ}\n", nil)
	if cfg.Scheduler.Timezone != "UTC" {
		t.Errorf("timezone = %q, want UTC", cfg.Scheduler.Timezone)
	}
}

func TestValidateForRun(t *testing.T) {
	t.Parallel()
	const example = "discord:\n  token: ${DISCORD_TOKEN}\n"

	cfg := mustLoad(t, example, nil)
	err := cfg.ValidateForRun()
	if err == nil || !errors.Is(err, ErrInvalid) {
		t.Fatalf("ValidateForRun without token = %v, want ErrInvalid", err)
	}
	for _, want := range []string{"test.yaml:2: discord.token:", "the example config reads ${DISCORD_TOKEN}", "unset or empty", "set discord.token in test.yaml", "`bot demo` needs no token"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}

	if err := mustLoad(t, example, map[string]string{"DISCORD_TOKEN": "x"}).ValidateForRun(); err != nil {
		t.Errorf("with token: %v", err)
	}
	if err := Default().ValidateForRun(); err == nil || !strings.Contains(err.Error(), "discord.token") {
		t.Errorf("Default().ValidateForRun() = %v, want a token error", err)
	}

	const token = "MTA5ODc2NTQzMjEwOTg3NjU0.GhIjKl.abcdefghijklmnopqrstuvwxyz0123456789AB"
	for _, bad := range []string{"Bot " + token, token + " \n"} {
		c := mustLoad(t, example, map[string]string{"DISCORD_TOKEN": bad})
		err := c.ValidateForRun()
		if err == nil {
			t.Fatalf("token %q accepted", "…")
		}
		if strings.Contains(err.Error(), token[10:30]) {
			t.Errorf("message leaks the token: %s", err)
		}
	}
}

func TestTokenNeverInErrors(t *testing.T) {
	t.Parallel()
	const long = "MTA5ODc2NTQzMjEwOTg3NjU0.GhIjKl.abcdefghijklmnopqrstuvwxyz0123456789AB"
	const short = "Zm9v.YmFy.c2VjcmV0" // short enough that it would be echoed if not scrubbed
	cases := []struct {
		name, yaml string
		env        map[string]string
	}{
		{"long token in an int", "discord:\n  token: " + long + "\nsubagents:\n  maxConcurrent: " + long + "\n", nil},
		{"short token in an enum", "discord:\n  token: " + short + "\nlog:\n  level: " + short + "\n", nil},
		{"env token in an enum", "log:\n  format: ${DISCORD_TOKEN}\ndiscord:\n  token: ${DISCORD_TOKEN}\n", map[string]string{"DISCORD_TOKEN": short}},
		{"token in a URL", "discord:\n  token: " + short + "\n  apiURL: " + short + "\n", nil},
		{"apiKey as a duration", "models:\n  default:\n    provider: echo\n    apiKey: " + short + "\n    timeout: " + short + "\n", nil},
		{"http token in listen", "http:\n  token: " + short + "\n  listen: " + short + "\n", nil},
		{"token with a bad guild", "discord:\n  token: " + long + "\n  guilds: [\"" + long + "\"]\n", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := load(t, tc.yaml, tc.env)
			if err == nil {
				t.Fatal("bad config accepted")
			}
			msg := err.Error()
			if strings.Contains(msg, long) || strings.Contains(msg, short) {
				t.Errorf("message leaks the token: %s", msg)
			}
			if !strings.Contains(msg, "test.yaml:") {
				t.Errorf("message should still name the place: %s", msg)
			}
		})
	}
}

func TestExpand(t *testing.T) {
	t.Parallel()
	env := envOf(map[string]string{"A": "1", "EMPTY": ""})
	tests := []struct{ in, want string }{
		{"${A}", "1"},
		{"x${A}y${A}z", "x1y1z"},
		{"${MISSING}", ""},
		{"${MISSING:-d}", "d"},
		{"${EMPTY:-d}", "d"},
		{"${A:-d}", "1"},
		{"${MISSING:-}", ""},
		{"$A $ $$ a$", "$A $ $$ a$"},
		{"$${A}", "${A}"},
	}
	for _, tc := range tests {
		var unset []string
		got, err := expand(tc.in, env, &unset)
		if err != nil || got != tc.want {
			t.Errorf("expand(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	var unset []string
	if _, err := expand("${MISSING}${EMPTY}${MISSING}${A}", env, &unset); err != nil ||
		!reflect.DeepEqual(unset, []string{"MISSING", "EMPTY"}) {
		t.Errorf("unset = %v, %v", unset, err)
	}
	for _, bad := range []string{"${", "${A", "${}", "${A-B}", "${:-x}"} {
		if _, err := expand(bad, env, nil); err == nil {
			t.Errorf("expand(%q) succeeded", bad)
		}
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte("discord:\n  token: ${AGENTBOT_TEST_TOKEN}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AGENTBOT_TEST_TOKEN", "from-env")
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Discord.Token != "from-env" {
		t.Errorf("token = %q; Load must expand from the process environment", cfg.Discord.Token)
	}

	if err := os.WriteFile(path, []byte("log:\n  level: loud\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), path+":2: log.level:") {
		t.Errorf("Load error = %v, want it to name %s:2", err, path)
	}
}

func TestMissingFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "config.yaml")
	_, err := Load(path)
	if err == nil {
		t.Fatal("Load of a missing file succeeded")
	}
	if !errors.Is(err, ErrInvalid) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("error %v should wrap ErrInvalid and fs.ErrNotExist", err)
	}
	for _, want := range []string{path, "not found", "copy config.example.yaml to " + path} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
}

func TestValidateBuiltInCode(t *testing.T) {
	t.Parallel()
	cfg := Default()
	cfg.Scheduler.Timezone = "Nowhere/Else"
	err := cfg.Validate()
	if err == nil || err.Error() != `scheduler.timezone: unknown timezone "Nowhere/Else": use an IANA name such as "UTC" or "Europe/Berlin"` {
		t.Errorf("Validate = %v", err)
	}
	cfg = Default()
	cfg.HTTP.Listen = "127.0.0.1:0" // an ephemeral port is fine for tests
	if err := cfg.Validate(); err != nil {
		t.Error(err)
	}
}

func TestStorePostgres(t *testing.T) {
	const secret = "postgres://bot:s3cr3t-password@db:5432/agentbot"
	env := func(k string) (string, bool) { return secret, k == "DATABASE_URL" }
	cfg, err := LoadBytes("test.yaml", []byte("store:\n  driver: postgres\n  dsn: ${DATABASE_URL}\n"), env)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Store.Driver != "postgres" || cfg.Store.DSN != secret {
		t.Fatalf("store = %+v", cfg.Store)
	}
	// With postgres the run still needs a token, and the error never shows the dsn.
	if err := cfg.ValidateForRun(); err == nil || !strings.Contains(err.Error(), "discord.token") || strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("ValidateForRun with postgres and no token: %v", err)
	}
	// bolt stays the default.
	cfg, err = LoadBytes("test.yaml", []byte("log: {level: info}\n"), env)
	if err != nil || cfg.Store.Driver != "bolt" || cfg.Store.Path == "" {
		t.Fatalf("default store = %+v, %v", cfg.Store, err)
	}
	// The dsn is a secret: an error elsewhere in the file never echoes it.
	_, err = LoadBytes("test.yaml", []byte("store:\n  driver: postgres\n  dsn: ${DATABASE_URL}\n  bogus: "+secret+"\n"), env)
	if err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("error = %v", err)
	}
}

// TestAccessOnePolicy: top-level access and its alias discord.access give one policy (both fields hold it), with
// Matrix ids accepted in the lists.
func TestAccessOnePolicy(t *testing.T) {
	for _, tc := range []struct{ name, yaml string }{
		{"access", "access:\n  dm: off\n  allow: {users: [\"@alice:example.org\", \"123456789012345678\"], channels: [\"!room:example.org\"]}\n  rateLimit: {turns: 3, per: 1h}\n"},
		{"discord.access", "discord:\n  access:\n    dm: off\n    allow: {users: [\"@alice:example.org\", \"123456789012345678\"], channels: [\"!room:example.org\"]}\n    rateLimit: {turns: 3, per: 1h}\n"},
	} {
		c, err := LoadBytes("test.yaml", []byte(tc.yaml), func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for _, a := range []AccessConfig{c.Access, c.Discord.Access} {
			if a.DM != DMOff || len(a.Allow.Users) != 2 || a.Allow.Channels[0] != "!room:example.org" || a.RateLimit.Turns != 3 {
				t.Errorf("%s: access %+v, want the file's", tc.name, a)
			}
		}
	}
}
