// Package openai is the model provider for the OpenAI Chat Completions API
// and the servers that speak it (OpenAI, Ollama, vLLM, LM Studio,
// OpenRouter), built on the official SDK github.com/openai/openai-go/v3.
//
// Config: BaseURL includes the API version path (default
// "https://api.openai.com/v1"; Ollama "http://localhost:11434/v1"); Model is
// required; APIKey may be empty for local servers. OPENAI_* environment
// variables are not read: configuration comes only from model.Config.
// Timeout bounds the whole call including the SDK's retries.
//
// Replay rules (BuildMessages), applied to a copy of the history; the stored
// transcript is never modified, merging happens only here:
//   - The System prompt is the first message (role "system"), when set.
//   - Tool results are paired with their calls (model.PairToolResults): each
//     assistant message with tool_calls is followed directly by one "tool"
//     message per call (tool_call_id set); missing results are synthesized,
//     orphan results dropped. Tool messages are never merged.
//   - Adjacent user messages, and adjacent assistant messages, are merged
//     into one message, texts joined with model.MergeSeparator (a blank
//     line): many OpenAI-compatible servers (vLLM and Ollama chat templates)
//     reject roles that do not alternate. An assistant message carrying
//     tool_calls is never merged with the message after it (a plain
//     assistant text before it is merged into it).
//   - Messages with empty text and no tool calls are skipped.
//   - A user message's Name becomes the "name" field (characters outside
//     [A-Za-z0-9_-] replaced by "_", at most 64); when merged messages have
//     different authors, the name is omitted. Assistant names are not sent.
//   - MaxTokens > 0 is sent as max_tokens; 0 leaves it to the server.
//
// Errors are *model.Error: the SDK's *openai.Error status selects the kind;
// deadlines and network timeouts are KindTimeout. The API key is redacted
// from every error text.
package openai
