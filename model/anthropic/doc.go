// Package anthropic is the model provider for the Anthropic Messages API,
// built on the official SDK github.com/anthropics/anthropic-sdk-go/v2.
//
// Config: BaseURL without the version path (default
// "https://api.anthropic.com"; requests go to <BaseURL>/v1/messages); Model
// and APIKey are required. ANTHROPIC_* environment variables and profile
// files are not read: configuration comes only from model.Config. Timeout
// bounds the whole call including the SDK's retries.
//
// Replay rules (BuildParams), applied to a copy of the history; the stored
// transcript is never modified, merging happens only here:
//   - The System prompt is the top-level "system" field, never a message.
//   - Tool results are paired with their calls (model.PairToolResults);
//     an assistant message's tool calls become tool_use blocks after its
//     text, and tool results become tool_result blocks in the following
//     user message (placed before any text block of that message).
//     Missing results are synthesized, orphan results dropped.
//   - Messages must alternate user/assistant: adjacent same-role messages
//     are merged into one message; adjacent text is joined into one text
//     block with model.MergeSeparator (a blank line).
//   - If the history starts with an assistant message (an intro, a notice,
//     a job result in a fresh session), a user message with the text
//     Placeholder ("(conversation continues)") is put first, because the
//     API requires the first message to be from the user.
//   - Messages with empty or whitespace-only text and no tool calls are
//     skipped (the API rejects empty text blocks). If the history ends with
//     an assistant message, the API treats it as a prefill; its trailing
//     whitespace is trimmed (the API rejects it).
//   - Name (author) is not sent; the Messages API has no field for it.
//   - max_tokens is required: Request.MaxTokens, or DefaultMaxTokens (1024).
//
// Errors are *model.Error: the SDK's *anthropic.Error status selects the
// kind; deadlines and network timeouts are KindTimeout. The API key is
// redacted from every error text.
package anthropic
