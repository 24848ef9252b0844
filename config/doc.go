// Package config loads the bot's YAML configuration into a typed, validated Config.
//
// Load reads a file; LoadBytes does the same for bytes already in memory and takes the environment
// lookup as a parameter, so tests need not touch the process environment. Both:
//
//  1. parse the YAML into a node tree (one document; syntax errors keep the parser's line number);
//  2. expand ${VAR} and ${VAR:-default} in scalar values only (never in keys or comments), after parsing,
//     so an expanded value can never change the YAML structure. ${VAR:-default} uses the default when VAR
//     is unset or empty (as in the shell); an unset VAR without a default expands to "". $${ gives a
//     literal "${". A bare $NAME is not expanded, so passwords containing "$" survive;
//  3. decode strictly over Default(): every key must be known, every value must have the expected type,
//     and a key that is absent (or null, or empty after expansion for a non-string value) keeps its default;
//  4. fill the defaults that depend on other values (an agent's name defaults to its id; an empty string
//     where a non-empty default exists takes the default, except http.listen where "" disables the server);
//  5. validate ranges, enumerations, ids, URLs, durations, the timezone and cross references.
//
// Invariants:
//   - Every error from Load, LoadBytes, Validate and ValidateForRun is a *Error that wraps ErrInvalid
//     (errors.Is(err, ErrInvalid)), so callers can exit with status 2. A missing file also wraps
//     fs.ErrNotExist and says to copy config.example.yaml.
//   - An error names one problem: the key path (discord.threadBindings.idleHours, agents[1].id,
//     models.gpt.apiKey), the file and line where the parser knows them, and what to do.
//   - Secrets (any value under a key named token, apiKey or dsn) never appear in an error message: values
//     are quoted back only when short (at most 40 characters), and every message is scrubbed of the
//     configured secret values of 8 characters or more.
//   - A Config returned without error satisfies Validate; the first agent is the default agent and every
//     agent's model names an entry of Models.
//   - Gateway intents are fixed in code, not configured.
//
// Design choices worth knowing:
//   - Provider "openai" and "anthropic" need a model, and an apiKey unless baseURL is set: a custom
//     baseURL usually means a local or proxy server (Ollama, vLLM, LM Studio) that needs no key.
//   - scheduler.maxCatchUp is how many of a job's missed instants are run after downtime when
//     catchUpMissed is on; the default 1 runs the job once for all the instants it missed.
//   - store.driver is "bolt" (default; store.path required) or "postgres" (store.dsn required, usually
//     ${DATABASE_URL}); ValidateForRun accepts both;
//     `bot migrate-store` copies a bolt store into PostgreSQL.
//   - The package imports time/tzdata, so timezones validate and load on a machine without zoneinfo.
package config
