// Package modeltest has test helpers for code that uses models: loopback
// fakes of the OpenAI Chat Completions and Anthropic Messages HTTP APIs that
// reject what the strict real servers reject, and a scripted Provider.
//
// The fakes listen on 127.0.0.1 (httptest), record every request body, and
// answer a valid request with the Reply chosen by their Respond func
// (default: text "ok"). A request the real API would reject gets a 400 in
// that API's error JSON shape, so a request-builder bug fails the call.
package modeltest
