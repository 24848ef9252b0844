package fallback

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/model"
)

// Model is one configured model: its provider and the models tried, in
// order, when it fails in a retryable way.
type Model struct {
	Provider  model.Provider
	Fallbacks []string
}

// Breaker configures every model's circuit breaker; Failures 0 turns
// breakers off.
type Breaker struct {
	Failures int           // retryable failures within Window that open it
	Window   time.Duration // how far back failures count
	Cooldown time.Duration // how long an open breaker skips its model
	// MaxRetryAfter bounds how long a provider's Retry-After opens the
	// breaker (0: Retry-After is not followed).
	MaxRetryAfter time.Duration
}

// DefaultBreaker is the breaker the bot runs with (DECISIONS 221, 382).
var DefaultBreaker = Breaker{Failures: 3, Window: time.Minute, Cooldown: time.Minute, MaxRetryAfter: 10 * time.Minute}

// Options are the models (by models entry name) and the breaker settings.
type Options struct {
	Models  map[string]Model
	Breaker Breaker
}

// Observer receives per-model figures (package metrics implements it).
type Observer interface {
	// ModelCall counts one call: outcome is "ok" or the error kind.
	ModelCall(model, outcome string)
	// ModelFallback counts a call handed on from one model to the next.
	ModelFallback(from, to string)
	// ModelBreaker reports a breaker's new state (a State).
	ModelBreaker(model, state string)
}

// Deps are the set's collaborators; Observer may be nil.
type Deps struct {
	Clock    clock.Clock
	Log      zerolog.Logger
	Observer Observer
}

// Set holds every model's provider and breaker and hands out chains.
type Set struct {
	models map[string]*entry
	deps   Deps
}

type entry struct {
	name      string
	provider  model.Provider
	fallbacks []string
	breaker   *breaker
}

// New checks that every fallback names a configured model other than its
// own, and builds the set. It does no I/O.
func New(opts Options, deps Deps) (*Set, error) {
	if deps.Clock == nil {
		return nil, errors.New("fallback: a clock is required")
	}
	s := &Set{models: make(map[string]*entry, len(opts.Models)), deps: deps}
	for name, m := range opts.Models {
		if m.Provider == nil {
			return nil, fmt.Errorf("fallback: model %s has no provider", name)
		}
		for _, f := range m.Fallbacks {
			if _, ok := opts.Models[f]; !ok || f == name {
				return nil, fmt.Errorf("models.%s.fallbacks: %q is not another configured model", name, f)
			}
		}
		s.models[name] = &entry{name: name, provider: m.Provider, fallbacks: m.Fallbacks, breaker: newBreaker(opts.Breaker)}
		if deps.Observer != nil {
			deps.Observer.ModelBreaker(name, string(Closed))
		}
	}
	return s, nil
}

// Provider returns the chain that starts with the model name: the model,
// then its fallbacks. It is a model.Streamer when the model's own provider
// is one (a fallback that cannot stream shows its answer at once).
func (s *Set) Provider(name string) (model.Provider, bool) {
	e, ok := s.models[name]
	if !ok {
		return nil, false
	}
	c := &chain{set: s, links: append([]string{name}, e.fallbacks...)}
	if _, ok := e.provider.(model.Streamer); ok {
		return streamChain{c}, true
	}
	return c, true
}

// Degraded lists the models whose breaker is open or probing, as
// "name (open)" or "name (half-open)", sorted (for /readyz).
func (s *Set) Degraded() []string {
	now := s.deps.Clock.Now()
	var out []string
	for name, e := range s.models {
		if st := e.breaker.state(now); st != Closed {
			out = append(out, name+" ("+string(st)+")")
		}
	}
	slices.Sort(out)
	return out
}

type chain struct {
	set   *Set
	links []string
}

// Complete implements model.Provider.
func (c *chain) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	return c.call(ctx, func(p model.Provider, _ *bool) (model.Response, error) { return p.Complete(ctx, req) })
}

type streamChain struct{ *chain }

// Stream implements model.Streamer: onText sees one model's text only.
func (c streamChain) Stream(ctx context.Context, req model.Request, onText func(string)) (model.Response, error) {
	return c.call(ctx, func(p model.Provider, shown *bool) (model.Response, error) {
		sp, ok := p.(model.Streamer)
		if !ok {
			resp, err := p.Complete(ctx, req)
			if err == nil && resp.Text != "" {
				*shown = true
				onText(resp.Text)
			}
			return resp, err
		}
		return sp.Stream(ctx, req, func(delta string) {
			*shown = true
			onText(delta)
		})
	})
}

// call runs do on each link in turn until one answers, a failure is not
// retryable, text was shown, or the links ran out.
func (c *chain) call(ctx context.Context, do func(p model.Provider, shown *bool) (model.Response, error)) (model.Response, error) {
	var last error
	var skipped []string
	from := ""
	for _, name := range c.links {
		e := c.set.models[name]
		if !c.set.allow(e) {
			skipped = append(skipped, name)
			if from == "" {
				from = name
			}
			continue
		}
		if from != "" {
			c.set.fallback(from, name, last)
		}
		shown := false
		resp, err := do(e.provider, &shown)
		if err == nil {
			c.set.settle(e, "ok", verdictUp, nil)
			resp.Model = name
			return resp, nil
		}
		kind := model.KindOf(err)
		switch {
		case ctx.Err() != nil || kind == model.KindCanceled:
			c.set.settle(e, string(model.KindCanceled), verdictNone, nil)
			return model.Response{}, err
		case !model.Retryable(err):
			// The provider answered: it is up, and the failure is the
			// request's or the configuration's, for an operator to see.
			v := verdictUp
			if kind == model.KindUnknown {
				v = verdictNone
			}
			c.set.settle(e, string(kind), v, nil)
			return model.Response{}, err
		}
		c.set.settle(e, string(kind), verdictDown, err)
		if shown {
			return model.Response{}, err
		}
		last, from = err, name
	}
	if last != nil {
		return model.Response{}, last
	}
	return model.Response{}, &model.Error{Kind: model.KindServer, Provider: "fallback",
		Err: fmt.Errorf("%s skipped: failed repeatedly, tried again after a cool-down", strings.Join(skipped, ", "))}
}

// allow asks e's breaker whether e may be called now.
func (s *Set) allow(e *entry) bool {
	ok, changed := e.breaker.allow(s.deps.Clock.Now())
	if changed && s.deps.Observer != nil {
		s.deps.Observer.ModelBreaker(e.name, string(HalfOpen))
	}
	return ok
}

// settle records a call's outcome on e's breaker and observer; err (a
// retryable failure, else nil) may carry the provider's Retry-After.
func (s *Set) settle(e *entry, outcome string, v verdict, err error) {
	now := s.deps.Clock.Now()
	st, changed := e.breaker.record(now, v, model.RetryUntil(err, now))
	if s.deps.Observer != nil {
		s.deps.Observer.ModelCall(e.name, outcome)
		if changed {
			s.deps.Observer.ModelBreaker(e.name, string(st))
		}
	}
	if changed {
		ev := s.deps.Log.Info()
		if st == Open {
			ev = s.deps.Log.Warn()
		}
		ev.Str("model", e.name).Str("breaker", string(st)).Msg("model circuit breaker changed state")
	}
}

// fallback records that a call goes on from one model to the next.
func (s *Set) fallback(from, to string, cause error) {
	ev := s.deps.Log.Warn().Str("model", from).Str("fallback", to)
	if cause != nil {
		ev = ev.Str("kind", string(model.KindOf(cause))).Err(cause)
	} else {
		ev = ev.Str("kind", "breaker-open")
	}
	ev.Msg("model unavailable; trying its fallback")
	if s.deps.Observer != nil {
		s.deps.Observer.ModelFallback(from, to)
	}
}
