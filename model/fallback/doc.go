// Package fallback puts configured models into fallback chains with a
// circuit breaker per model: a call that fails in a retryable way
// (model.Retryable) on one model is made again on the next model of the
// chain, within the same call (so within the same turn and tool round).
//
// Invariants:
//   - A non-retryable failure (a rejected request or key, a cancellation,
//     anything unclassified) is returned as it is: no other model hides it.
//   - A streamed call never falls back after it handed its first piece of
//     text to the caller: a message never mixes two models' text.
//   - Each model has one breaker, shared by every chain it is in: after
//     Breaker.Failures retryable failures within Breaker.Window it is
//     skipped for Breaker.Cooldown, then exactly one call probes it; the
//     probe's success closes the breaker, its failure opens it again. A dead
//     provider costs one failed call per cool-down, not one per turn.
//   - A chain is the model followed by its own fallbacks list, not by its
//     fallbacks' fallbacks: every call costs at most len(chain) attempts,
//     each with the model's own SDK retries (set by the caller).
//   - Time is read only from the injected clock.
//   - Response.Model names the models entry that answered.
package fallback
