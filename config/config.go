package config

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"time"
	_ "time/tzdata" // timezones must validate on a machine without zoneinfo files
)

// Model providers accepted in models.<name>.provider.
const (
	ProviderEcho      = "echo"      // answers without a network; the default
	ProviderOpenAI    = "openai"    // Chat Completions API (OpenAI, Ollama, vLLM, LM Studio, OpenRouter)
	ProviderAnthropic = "anthropic" // Anthropic Messages API
)

// Config is the whole configuration. The zero value is not valid; start from Default or Load.
type Config struct {
	Discord   DiscordConfig          `yaml:"discord"`
	Agents    []AgentConfig          `yaml:"agents"` // the first is the default agent
	Models    map[string]ModelConfig `yaml:"models"`
	Subagents SubagentsConfig        `yaml:"subagents"`
	Scheduler SchedulerConfig        `yaml:"scheduler"`
	Store     StoreConfig            `yaml:"store"`
	HTTP      HTTPConfig             `yaml:"http"`
	Log       LogConfig              `yaml:"log"`
	MCP       MCPConfig              `yaml:"mcp"`
	ACP       ACPConfig              `yaml:"acp"` // external coding agents (Agent Client Protocol)
	Matrix    MatrixConfig           `yaml:"matrix"`
	// Access is who may start turns, on every platform (ids are platform ids: Discord snowflakes, Matrix
	// @user:server and !room:server). discord.access is its old name, still accepted (not both).
	Access AccessConfig `yaml:"access"`
	// Audit compares what chats display with the transcripts (`bot audit`; README "Checking the promise").
	Audit AuditConfig `yaml:"audit"`
	// Memory is recall: the model's search over what the chats displayed.
	Memory MemoryConfig `yaml:"memory"`

	src *source // where the values came from; nil for a Config built in code
}

// AuditConfig is the audit section.
type AuditConfig struct {
	// Every is the periodic audit's interval: every conversation's transcript window is compared with what
	// its platform displays, differences logged and counted (the gauge agentbot_audit_differences). 0 = off.
	Every time.Duration `yaml:"every"`
}

// MinAuditEvery is the shortest audit.every: each audit reads every conversation's history.
const MinAuditEvery = time.Minute

// DiscordConfig is the discord section. Gateway intents are fixed in code.
type DiscordConfig struct {
	Token          string               `yaml:"token"`  // required by `bot run`; see ValidateForRun
	APIURL         string               `yaml:"apiURL"` // REST base override; "" = Discord
	Guilds         []string             `yaml:"guilds"` // allowlist of guild ids; empty = all
	Operators      OperatorsConfig      `yaml:"operators"`
	Access         AccessConfig         `yaml:"access"`
	Edits          string               `yaml:"edits"` // history | reprocess (EditsHistory, EditsReprocess)
	ThreadBindings ThreadBindingsConfig `yaml:"threadBindings"`
	Shard          ShardConfig          `yaml:"shard"`
}

// ShardConfig is this process's gateway shard. The default (id 0, count 1) is unsharded.
type ShardConfig struct {
	ID    int    `yaml:"id"`    // 0 <= id < count
	Count string `yaml:"count"` // a whole number >= 1, or "auto" (GET /gateway/bot's recommended shards)
}

// ShardAuto is the shard count that asks Discord for its recommendation.
const ShardAuto = "auto"

// Total returns the configured shard count; auto is true for "auto" (the count is then known only
// after asking Discord, and n is 0). An empty Count is 1. Call on a validated Config.
func (s ShardConfig) Total() (n int, auto bool) {
	switch s.Count {
	case "":
		return 1, false
	case ShardAuto:
		return 0, true
	}
	n, err := strconv.Atoi(s.Count)
	if err != nil {
		return 1, false
	}
	return n, false
}

// OperatorsConfig lists who may run privileged commands; both empty = members with Manage Server.
type OperatorsConfig struct {
	Users []string `yaml:"users"`
	Roles []string `yaml:"roles"`
}

// AccessConfig is who may start turns (invariant 13). A message it refuses gets no model call, no
// reply and no transcript entry. Operators are exempt from it.
type AccessConfig struct {
	DM        string          `yaml:"dm"`    // off | allowlist (only allow.users) | members (users who share a served guild)
	Allow     AccessLists     `yaml:"allow"` // all empty = everyone, subject to deny
	Deny      AccessLists     `yaml:"deny"`
	RateLimit RateLimitConfig `yaml:"rateLimit"`
	Budget    BudgetConfig    `yaml:"budget"`
}

// BudgetConfig is access.budget: model usage per user and per server or
// room within a sliding window; 0 turns a limit off.
type BudgetConfig struct {
	Tokens      int           `yaml:"tokens"`
	Cost        float64       `yaml:"cost"`
	Per         time.Duration `yaml:"per"`
	GuildTokens int           `yaml:"guildTokens"`
	GuildCost   float64       `yaml:"guildCost"`
}

// AccessLists are user, role and channel ids.
type AccessLists struct {
	Users    []string `yaml:"users"`
	Roles    []string `yaml:"roles"`
	Channels []string `yaml:"channels"`
}

// RateLimitConfig is the turn budget: at most Turns turns per user (across all conversations) and
// GuildTurns per guild within any window of length Per. 0 disables that limit.
type RateLimitConfig struct {
	Turns      int           `yaml:"turns"`
	Per        time.Duration `yaml:"per"`
	GuildTurns int           `yaml:"guildTurns"`
}

// What an edit of an answered message does (discord.edits).
const (
	EditsHistory   = "history"   // the model sees the edited text next time
	EditsReprocess = "reprocess" // an edited message addressed to the bot is answered again
)

// DM access modes (discord.access.dm).
const (
	DMOff       = "off"
	DMAllowlist = "allowlist"
	DMMembers   = "members"
)

// ThreadBindingsConfig controls binding threads to sessions.
type ThreadBindingsConfig struct {
	Enabled               bool    `yaml:"enabled"`
	SpawnSubagentSessions bool    `yaml:"spawnSubagentSessions"`
	IdleHours             float64 `yaml:"idleHours"`   // 0 disables
	MaxAgeHours           float64 `yaml:"maxAgeHours"` // 0 disables
}

// IdleTimeout is IdleHours as a duration; 0 means no idle expiry.
func (t ThreadBindingsConfig) IdleTimeout() time.Duration { return hours(t.IdleHours) }

// MaxAge is MaxAgeHours as a duration; 0 means no age cap.
func (t ThreadBindingsConfig) MaxAge() time.Duration { return hours(t.MaxAgeHours) }

func hours(h float64) time.Duration { return time.Duration(h * float64(time.Hour)) }

// AgentConfig is one persona.
type AgentConfig struct {
	ID           string `yaml:"id"`   // [a-z0-9_-]+, unique; part of session keys
	Name         string `yaml:"name"` // display name; defaults to ID
	AvatarURL    string `yaml:"avatarURL"`
	SystemPrompt string `yaml:"systemPrompt"`
	Model        string `yaml:"model"` // a key of Config.Models
	// MCP names the servers under mcp.servers whose tools this agent (and
	// its subagents) may use.
	MCP []string `yaml:"mcp"`
	// Channels are the channel, category and server ids (Matrix room ids)
	// this agent answers in; a thread follows its parent, the most specific
	// claim wins, and the first agent answers where none claims.
	Channels []string `yaml:"channels"`
}

// MCPConfig is the mcp section: Model Context Protocol servers whose tools
// agents may use.
type MCPConfig struct {
	Servers map[string]MCPServerConfig `yaml:"servers"` // name: [a-zA-Z0-9-] (tools reach the model as <name>__<tool>)
}

// MCPServerConfig is one MCP server: a stdio program (Command, Args, Env)
// or a streamable HTTP endpoint (URL, Headers). Env and Headers values are
// secrets (never logged).
type MCPServerConfig struct {
	Command string            `yaml:"command"`
	Args    []string          `yaml:"args"`
	Env     map[string]string `yaml:"env"`
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"`
	// Timeout bounds each tool call (and the start handshake).
	Timeout time.Duration `yaml:"timeout"`
	// AllowedTools are the server's tools offered; empty = every tool it lists.
	AllowedTools []string `yaml:"allowedTools"`
	// Users and Roles may use the server; all empty (and OperatorsOnly
	// false) = everyone allowed to talk to the bot.
	Users []string `yaml:"users"`
	Roles []string `yaml:"roles"`
	// OperatorsOnly lets operators use the server (besides Users and Roles).
	OperatorsOnly bool `yaml:"operatorsOnly"`
	// MaxResultBytes caps the text of one tool result the model sees.
	MaxResultBytes int `yaml:"maxResultBytes"`
}

// Default MCP server settings.
const (
	DefaultMCPTimeout        = 30 * time.Second
	DefaultMCPMaxResultBytes = 32 << 10
)

// setDefaults prepares a map element before the decoder fills it from the file.
func (m *MCPServerConfig) setDefaults() {
	*m = MCPServerConfig{Timeout: DefaultMCPTimeout, MaxResultBytes: DefaultMCPMaxResultBytes}
}

// ModelConfig is one named model endpoint.
type ModelConfig struct {
	Provider     string        `yaml:"provider"` // ProviderEcho, ProviderOpenAI or ProviderAnthropic
	BaseURL      string        `yaml:"baseURL"`
	APIKey       string        `yaml:"apiKey"`
	Model        string        `yaml:"model"`      // provider's model name; required for openai/anthropic
	MaxHistory   int           `yaml:"maxHistory"` // transcript entries sent per call, 1..1000
	Timeout      time.Duration `yaml:"timeout"`    // per model call
	MaxToolSteps int           `yaml:"maxToolSteps"`
	// Vision: the model takes images (OpenAI image_url parts, Anthropic
	// image blocks); false names an image in the text instead.
	Vision bool `yaml:"vision"`
	// Stream: the reply is shown as the model writes it (one message
	// edited about once a second, continued at 2000 characters).
	Stream bool `yaml:"stream"`
	// Fallbacks are models entries tried in order when this one fails in a
	// retryable way (429, 5xx, overloaded, timeout, refused connection),
	// never after the first token of a reply was shown.
	Fallbacks []string `yaml:"fallbacks"`
	// Price is what this model's tokens cost, for /usage and budgets.
	Price PriceConfig `yaml:"price"`
	// Footer: a reply ends with a line naming the model that answered.
	Footer bool `yaml:"footer"`
}

// PriceConfig is a model's price in currency units per million tokens.
type PriceConfig struct {
	Input  float64 `yaml:"input"`
	Output float64 `yaml:"output"`
}

// SubagentsConfig limits subagent runs.
type SubagentsConfig struct {
	MaxConcurrent int           `yaml:"maxConcurrent"`
	RunTimeout    time.Duration `yaml:"runTimeout"`
}

// SchedulerConfig is the job scheduler.
type SchedulerConfig struct {
	Enabled       bool               `yaml:"enabled"`
	Timezone      string             `yaml:"timezone"` // IANA name; the default for jobs without their own
	CatchUpMissed bool               `yaml:"catchUpMissed"`
	MaxCatchUp    int                `yaml:"maxCatchUp"` // missed instants run per job after downtime; 1 = once for all
	FailureAlert  FailureAlertConfig `yaml:"failureAlert"`
	RunRetention  int                `yaml:"runRetention"` // run records kept per job
}

// MemoryConfig is the memory section.
type MemoryConfig struct {
	// Enabled offers the recall tool and keeps its search index beside the store (bbolt: a directory
	// next to the file; PostgreSQL: tables in the same database). Off (the default): no tool, and no
	// index is kept (an existing one is removed at start).
	Enabled bool `yaml:"enabled"`
	// Notes offers the remember and forget tools and gives each turn the notes in its scope (a note is a
	// visible message in its chat). Default true; only with Enabled.
	Notes bool `yaml:"notes"`
	// Embeddings adds meaning to recall's ranking (memory_embeddings.go).
	Embeddings EmbeddingsConfig `yaml:"embeddings"`
}

// NotesOn reports whether notes are on: memory.enabled and memory.notes.
func (m MemoryConfig) NotesOn() bool { return m.Enabled && m.Notes }

// Location is the scheduler's timezone, UTC when Timezone is empty or (in a Config that was not
// validated) unknown.
func (s SchedulerConfig) Location() *time.Location {
	if s.Timezone == "" {
		return time.UTC
	}
	loc, err := time.LoadLocation(s.Timezone)
	if err != nil {
		return time.UTC
	}
	return loc
}

// FailureAlertConfig says when a failing job posts an alert.
type FailureAlertConfig struct {
	After    int           `yaml:"after"`    // consecutive failures before alerting
	Cooldown time.Duration `yaml:"cooldown"` // minimum time between alerts for one job
}

// StoreConfig is the persistent store.
type StoreConfig struct {
	Driver string `yaml:"driver"` // "bolt" (default) or "postgres"
	Path   string `yaml:"path"`   // bolt: the file; relative paths are resolved against the working directory
	DSN    string `yaml:"dsn"`    // postgres: connection string, e.g. ${DATABASE_URL}; a secret (never echoed)
	// DeliveryRetentionDays: outbox records (one per message the bot sent)
	// older than this many days are deleted once delivered or failed; pending
	// ones are always kept. 0 keeps them forever. Default 30.
	DeliveryRetentionDays int `yaml:"deliveryRetentionDays"`
}

// DefaultDeliveryRetentionDays is store.deliveryRetentionDays's default.
const DefaultDeliveryRetentionDays = 30

// DeliveryRetention is DeliveryRetentionDays as a duration; 0 keeps forever.
func (s StoreConfig) DeliveryRetention() time.Duration {
	return time.Duration(s.DeliveryRetentionDays) * 24 * time.Hour
}

// HTTPConfig is the health/metrics server.
type HTTPConfig struct {
	Listen string `yaml:"listen"` // host:port; "" disables
	Token  string `yaml:"token"`  // optional bearer token, meant for non-loopback listeners
	// Timezone is the IANA zone the operator console shows times in ("" = UTC).
	Timezone string `yaml:"timezone"`
}

// Enabled reports whether the HTTP server should run.
func (h HTTPConfig) Enabled() bool { return h.Listen != "" }

// Location is the console's time zone (UTC when unset or, if not
// validated, unknown).
func (h HTTPConfig) Location() *time.Location {
	if h.Timezone == "" {
		return time.UTC
	}
	loc, err := time.LoadLocation(h.Timezone)
	if err != nil {
		return time.UTC
	}
	return loc
}

// LogConfig is logging.
type LogConfig struct {
	Level  string `yaml:"level"`  // debug | info | warn | error
	Format string `yaml:"format"` // console | json
}

// Defaults that a missing or empty value takes.
const (
	DefaultSystemPrompt = "You are a helpful assistant."
	DefaultModelName    = "default"
)

// Default returns the configuration used for every key that the file leaves out.
func Default() *Config {
	return &Config{
		Discord: DiscordConfig{
			ThreadBindings: ThreadBindingsConfig{Enabled: true, IdleHours: 24},
			Edits:          EditsHistory,
			Access:         AccessConfig{DM: DMMembers, RateLimit: RateLimitConfig{Turns: 20, Per: time.Hour, GuildTurns: 200}, Budget: BudgetConfig{Per: 24 * time.Hour}},
			Shard:          ShardConfig{ID: 0, Count: "1"},
		},
		Agents:    []AgentConfig{{ID: "main", Name: "Assistant", SystemPrompt: DefaultSystemPrompt, Model: DefaultModelName}},
		Models:    map[string]ModelConfig{DefaultModelName: defaultModel()},
		Subagents: SubagentsConfig{MaxConcurrent: 4, RunTimeout: 10 * time.Minute},
		Scheduler: SchedulerConfig{
			Enabled:       true,
			Timezone:      "UTC",
			CatchUpMissed: true,
			MaxCatchUp:    1,
			FailureAlert:  FailureAlertConfig{After: 2, Cooldown: time.Hour},
			RunRetention:  50,
		},
		Store:  StoreConfig{Driver: "bolt", Path: "data/bot.db", DeliveryRetentionDays: DefaultDeliveryRetentionDays},
		HTTP:   HTTPConfig{Listen: "127.0.0.1:9464", Timezone: "UTC"},
		Log:    LogConfig{Level: "info", Format: "console"},
		ACP:    ACPConfig{PermissionTimeout: 5 * time.Minute, Agents: map[string]ACPAgentConfig{}},
		Matrix: defaultMatrix(),
		Memory: MemoryConfig{Notes: true},
		Access: AccessConfig{DM: DMMembers, RateLimit: RateLimitConfig{Turns: 20, Per: time.Hour, GuildTurns: 200}, Budget: BudgetConfig{Per: 24 * time.Hour}},
	}
}

func defaultModel() ModelConfig {
	return ModelConfig{Provider: ProviderEcho, MaxHistory: 50, Timeout: 60 * time.Second, MaxToolSteps: 4}
}

// setDefaults prepares a list element before the decoder fills it from the file.
func (a *AgentConfig) setDefaults() {
	*a = AgentConfig{SystemPrompt: DefaultSystemPrompt, Model: DefaultModelName}
}

// setDefaults prepares a map element before the decoder fills it from the file; the provider stays
// empty because it is required.
func (m *ModelConfig) setDefaults() { *m = defaultModel(); m.Provider = "" }

// fillEmpty gives empty strings their defaults after decoding.
func (c *Config) fillEmpty() {
	d := Default()
	for i := range c.Agents {
		a := &c.Agents[i]
		if a.Name == "" {
			a.Name = a.ID
		}
		setIfEmpty(&a.SystemPrompt, DefaultSystemPrompt)
		setIfEmpty(&a.Model, DefaultModelName)
	}
	setIfEmpty(&c.Discord.Shard.Count, d.Discord.Shard.Count)
	setIfEmpty(&c.Scheduler.Timezone, d.Scheduler.Timezone)
	setIfEmpty(&c.Store.Driver, d.Store.Driver)
	setIfEmpty(&c.Store.Path, d.Store.Path)
	setIfEmpty(&c.Log.Level, d.Log.Level)
	setIfEmpty(&c.Log.Format, d.Log.Format)
}

func setIfEmpty(s *string, def string) {
	if *s == "" {
		*s = def
	}
}

// File is the file the config was loaded from ("" for one built in code).
func (c *Config) File() string {
	if c.src == nil {
		return ""
	}
	return c.src.file
}

// DefaultAgent is the first agent.
func (c *Config) DefaultAgent() AgentConfig { return c.Agents[0] }

// Agent returns the agent with the given id.
func (c *Config) Agent(id string) (AgentConfig, bool) {
	for _, a := range c.Agents {
		if a.ID == id {
			return a, true
		}
	}
	return AgentConfig{}, false
}

// Load reads, expands, decodes, defaults and validates the config file at path. It does not require
// a Discord token; call ValidateForRun before connecting to Discord.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &Error{File: path, cause: fs.ErrNotExist,
			Msg: "config file not found: copy config.example.yaml to " + path + " and edit it, or pass -config FILE"}
	}
	if err != nil {
		return nil, &Error{File: path, cause: err, Msg: "cannot read the config file: " + err.Error()}
	}
	return LoadBytes(path, data, os.LookupEnv)
}

// LoadBytes is Load for data already read; name is used in messages. env looks up ${VAR}
// references; nil means os.LookupEnv.
func LoadBytes(name string, data []byte, env func(string) (string, bool)) (*Config, error) {
	if env == nil {
		env = os.LookupEnv
	}
	root, err := parse(name, data)
	if err != nil {
		return nil, err
	}
	src := &source{file: name, lines: map[string]int{}, unset: map[string][]string{}}
	cfg := Default()
	if root != nil {
		src.secrets = collectSecrets(root, env)
		d := &decoder{src: src, env: env}
		if err := d.decodeRoot(root, cfg); err != nil {
			return nil, err
		}
	}
	cfg.src = src
	cfg.fillEmpty()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}
