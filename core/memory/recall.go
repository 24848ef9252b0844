package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/model"
)

// Viewer is the authority's view check (authz.Authority.CanView).
type Viewer interface {
	CanView(ctx context.Context, userID string, conv binding.ConversationRef) error
}

// RecallOptions tune Recall.
type RecallOptions struct {
	// DefaultLimit and MaxLimit bound a search's hits (0: 5 and 20).
	DefaultLimit, MaxLimit int
	// MaxQuery caps the query's length in bytes (0: 500).
	MaxQuery int
	// EmbedTimeout bounds embedding a query (0: 5s); past it the search
	// ranks by keywords alone.
	EmbedTimeout time.Duration
	// MinSimilarity is the cosine similarity a document needs to be a
	// semantic match (0: 0.35; negative: any).
	MinSimilarity float64
	// RefusalTTL is how long a refused view check is reused for the same
	// user and conversation (0: a minute; negative: never). Only refusals
	// are reused: a stale one hides, never shows; it spares the platform a
	// lookup per search of every conversation it no longer knows.
	RefusalTTL time.Duration
}

// maxRefusals bounds the refusals kept; past it they are all dropped.
const maxRefusals = 100_000

// RecallDeps are what Recall works with.
type RecallDeps struct {
	Index   Index
	Entries Entries
	Viewer  Viewer
	// Owners says whose subagent and job-run sessions are (nil: nobody's,
	// their entries are found only by SearchAll).
	Owners Owners
	// Vectors and Embedder (both or neither) rank by meaning too: the
	// query's vector's nearest documents in the view are fused with the
	// keyword hits. A failing endpoint degrades a search to keywords.
	Vectors  Vectors
	Embedder Embedder
	Health   *Health // nil: not recorded
	Log      zerolog.Logger
	Clock    clock.Clock // nil: the real clock
}

// Recall searches the index with the authority of one user.
type Recall struct {
	opt RecallOptions
	d   RecallDeps

	mu      sync.Mutex
	refused map[string]time.Time // user \x1f conversation key -> until
}

// NewRecall returns a Recall; it does no I/O.
func NewRecall(o RecallOptions, d RecallDeps) *Recall {
	if o.DefaultLimit <= 0 {
		o.DefaultLimit = 5
	}
	if o.MaxLimit <= 0 {
		o.MaxLimit = 20
	}
	if o.MaxQuery <= 0 {
		o.MaxQuery = 500
	}
	if o.EmbedTimeout <= 0 {
		o.EmbedTimeout = 5 * time.Second
	}
	if o.MinSimilarity == 0 {
		o.MinSimilarity = 0.35
	}
	if o.RefusalTTL == 0 {
		o.RefusalTTL = time.Minute
	}
	if d.Clock == nil {
		d.Clock = clock.Real{}
	}
	return &Recall{opt: o, d: d, refused: map[string]time.Time{}}
}

// Found is one recall result.
type Found struct {
	Hit
	// Conversation is where the entry was displayed.
	Conversation binding.ConversationRef
}

// Visible returns the index keys (session keys, OwnedSuffix for a
// subagent's or job run's undisplayed entries) userID may search now: a
// conversation's if userID may view it (the authority's view check; a DM
// only its own user's); a subagent's or job run's if userID ran it, and its
// displayed entries also if userID may view where they were displayed. A
// failed check is a refusal (fail closed).
func (r *Recall) Visible(ctx context.Context, userID string) ([]string, error) {
	v, err := r.visible(ctx, userID, nil)
	if err != nil {
		return nil, err
	}
	return v.keys, nil
}

// view is what one search may look at: index keys, and where each owned
// session displays (for its results' place).
type view struct {
	keys   []string
	owners map[string]Owner
}

// visible is Visible, limited to conversation only when it is set.
func (r *Recall) visible(ctx context.Context, userID string, only *binding.ConversationRef) (view, error) {
	if userID == "" {
		return view{}, &authz.Refusal{Msg: "no user's authority stands behind this search"}
	}
	keys, err := r.d.Entries.Sessions(ctx)
	if err != nil {
		return view{}, fmt.Errorf("recall: list sessions: %w", err)
	}
	seen := map[string]bool{} // conversation key -> viewable
	may := func(conv binding.ConversationRef) bool {
		conv = conv.Normalize()
		if only != nil && conv.Key() != only.Normalize().Key() {
			return false
		}
		ck := conv.Key()
		ok, known := seen[ck]
		if !known {
			ok = r.mayView(ctx, userID, conv)
			seen[ck] = ok
		}
		return ok
	}
	var v view
	var ownedKeys []string
	for _, key := range keys {
		if _, conv, ok := sessionkey.ConversationOf(key); ok {
			if may(conv) {
				v.keys = append(v.keys, key)
			}
		} else if owned(key) {
			ownedKeys = append(ownedKeys, key)
		}
	}
	if len(ownedKeys) == 0 || r.d.Owners == nil {
		return v, nil
	}
	if v.owners, err = r.d.Owners.Owners(ctx, ownedKeys); err != nil {
		return view{}, fmt.Errorf("recall: owners of %d sessions: %w", len(ownedKeys), err)
	}
	for _, key := range ownedKeys {
		o, ok := v.owners[key]
		switch {
		case !ok:
		case only == nil && o.User == userID:
			v.keys = append(v.keys, key, key+OwnedSuffix)
		case slices.ContainsFunc(o.Shown, may):
			v.keys = append(v.keys, key)
		}
	}
	return v, nil
}

// mayView is the authority's view check, a recent refusal reused.
func (r *Recall) mayView(ctx context.Context, userID string, conv binding.ConversationRef) bool {
	k := userID + "\x1f" + conv.Key()
	now := r.d.Clock.Now()
	r.mu.Lock()
	until, ok := r.refused[k]
	r.mu.Unlock()
	if ok && now.Before(until) {
		return false
	}
	if r.d.Viewer.CanView(ctx, userID, conv) == nil {
		return true
	}
	if r.opt.RefusalTTL > 0 {
		r.mu.Lock()
		if len(r.refused) >= maxRefusals {
			clear(r.refused)
		}
		r.refused[k] = now.Add(r.opt.RefusalTTL)
		r.mu.Unlock()
	}
	return false
}

// Search finds text in the conversations userID may view now, best
// first (newest first among equals). Every hit is re-read from the
// transcript store: one whose entry is erased is dropped (the index may
// lag an erasure; deleted text is never shown).
func (r *Recall) Search(ctx context.Context, userID, text string, limit int) ([]Found, error) {
	v, err := r.visible(ctx, userID, nil)
	if err != nil {
		return nil, err
	}
	return r.search(ctx, v, text, limit)
}

// SearchIn is Search within one conversation (if userID may view it): for
// answers everyone in that conversation sees (a Matrix room's command
// replies are public). A subagent's or job run's entries displayed there
// are included; their undisplayed ones are not.
func (r *Recall) SearchIn(ctx context.Context, userID string, conv binding.ConversationRef, text string, limit int) ([]Found, error) {
	v, err := r.visible(ctx, userID, &conv)
	if err != nil {
		return nil, err
	}
	return r.search(ctx, v, text, limit)
}

// SearchAll is Search over every conversation, for whoever already reads
// every transcript (the operator console).
func (r *Recall) SearchAll(ctx context.Context, text string, limit int) ([]Found, error) {
	keys, err := r.d.Entries.Sessions(ctx)
	if err != nil {
		return nil, fmt.Errorf("recall: list sessions: %w", err)
	}
	var v view
	var ownedKeys []string
	for _, k := range keys {
		switch {
		case owned(k):
			ownedKeys = append(ownedKeys, k)
			v.keys = append(v.keys, k, k+OwnedSuffix)
		case Indexed(k):
			v.keys = append(v.keys, k)
		}
	}
	if len(ownedKeys) > 0 && r.d.Owners != nil {
		if v.owners, err = r.d.Owners.Owners(ctx, ownedKeys); err != nil {
			return nil, fmt.Errorf("recall: owners of %d sessions: %w", len(ownedKeys), err)
		}
	}
	return r.search(ctx, v, text, limit)
}

// search searches the index keys of v.
func (r *Recall) search(ctx context.Context, v view, text string, limit int) ([]Found, error) {
	keys := v.keys
	text = strings.TrimSpace(text)
	if text == "" {
		return nil, &authz.Refusal{Msg: "the query is empty: say what to look for"}
	}
	if len(text) > r.opt.MaxQuery {
		return nil, &authz.Refusal{Msg: fmt.Sprintf("the query is %d bytes long; the limit is %d", len(text), r.opt.MaxQuery)}
	}
	if limit <= 0 {
		limit = r.opt.DefaultLimit
	}
	limit = min(limit, r.opt.MaxLimit)
	if len(keys) == 0 {
		return nil, nil
	}
	hits, err := r.hybrid(ctx, keys, text, limit)
	if err != nil {
		return nil, err
	}
	out := make([]Found, 0, len(hits))
	for _, h := range hits {
		if !slices.Contains(keys, h.Doc.Key) {
			return nil, fmt.Errorf("recall: the index returned %s, outside the conversations searched", h.Doc.Key)
		}
		h.Doc.Key = SessionOf(h.Doc.Key)
		es, err := r.d.Entries.Range(ctx, h.Doc.Key, h.Doc.Seq, 1)
		if err != nil {
			return nil, fmt.Errorf("recall: re-read %s: %w", h.Doc.ID(), err)
		}
		if len(es) == 0 || es[0].Seq != h.Doc.Seq || es[0].Deleted {
			continue
		}
		_, conv, ok := sessionkey.ConversationOf(h.Doc.Key)
		if o := v.owners[h.Doc.Key]; !ok && len(o.Shown) > 0 {
			conv = o.Shown[0]
		}
		h.Snippet = Snippet(h.Doc.Text, text, 200)
		out = append(out, Found{Hit: h, Conversation: conv})
	}
	return out, nil
}

// hybrid is the keyword search, fused with the semantic one when
// embeddings are on and the endpoint answers.
func (r *Recall) hybrid(ctx context.Context, keys []string, text string, limit int) ([]Hit, error) {
	if r.d.Vectors == nil || r.d.Embedder == nil {
		hits, err := r.d.Index.Search(ctx, Query{Text: text, Keys: keys, Limit: limit})
		if err != nil {
			return nil, fmt.Errorf("recall: search: %w", err)
		}
		return hits, nil
	}
	deep := max(3*limit, 20) // each list's depth for the fusion
	kw, err := r.d.Index.Search(ctx, Query{Text: text, Keys: keys, Limit: deep})
	if err != nil {
		return nil, fmt.Errorf("recall: search: %w", err)
	}
	sem, err := r.semantic(ctx, keys, text, deep)
	if err != nil {
		r.d.Log.Warn().Err(err).Msg("recall: semantic search failed; these results are ranked by keywords alone")
		return kw[:min(len(kw), limit)], nil
	}
	return fuse(kw, sem, limit), nil
}

// semantic returns the documents of keys nearest to text's vector.
func (r *Recall) semantic(ctx context.Context, keys []string, text string, limit int) ([]Hit, error) {
	ectx, cancel := context.WithTimeout(ctx, r.opt.EmbedTimeout)
	defer cancel()
	vecs, err := r.d.Embedder.Embed(ectx, []string{text})
	if err == nil && len(vecs) != 1 {
		err = fmt.Errorf("embeddings: %d vectors for one query", len(vecs))
	}
	if r.d.Health != nil {
		r.d.Health.set(err, r.d.Clock.Now())
	}
	if err != nil {
		return nil, err
	}
	hits, err := r.d.Vectors.Nearest(ctx, keys, vecs[0], limit)
	if err != nil {
		return nil, err
	}
	if r.opt.MinSimilarity > 0 {
		hits = slices.DeleteFunc(hits, func(h Hit) bool { return h.Score < r.opt.MinSimilarity })
	}
	return hits, nil
}

// Format renders results for the model and for /memory search: one line
// each with time, conversation, author, snippet and message.
func Format(fs []Found) string {
	if len(fs) == 0 {
		return "nothing found in the conversations you can view"
	}
	var b strings.Builder
	for i, f := range fs {
		if i > 0 {
			b.WriteByte('\n')
		}
		author := f.Doc.Author
		if author == "" {
			author = string(f.Doc.Role)
		}
		place := Place(f.Conversation)
		switch k := sessionkey.KindOf(f.Doc.Key); {
		case k == sessionkey.KindSubagent && f.Doc.MessageID == "":
			place = "a subagent's run (not displayed)"
		case k == sessionkey.KindJobRun && f.Doc.MessageID == "":
			place = "a background job's run (not displayed)"
		}
		fmt.Fprintf(&b, "[%d] %s · %s · %s: %s", i+1, f.Doc.At.UTC().Format(time.DateTime+" UTC"),
			place, author, f.Snippet)
		if f.Doc.MessageID != "" {
			fmt.Fprintf(&b, " (message %s)", f.Doc.MessageID)
		}
	}
	return b.String()
}

// Place names a conversation as delivery targets do: channel:<id>,
// user:<id> for a DM, matrix:... on Matrix.
func Place(conv binding.ConversationRef) string {
	if conv.Channel == sessionkey.PlatformMatrix {
		return sessionkey.FormatMatrixTarget(conv)
	}
	if u, ok := strings.CutPrefix(conv.ConversationID, sessionkey.DMPrefix); ok {
		return "user:" + u
	}
	return "channel:" + conv.ConversationID
}

// ToolRecall is the recall tool's name.
const ToolRecall = "recall"

// Tools offers the recall tool to turns while On says memory is enabled,
// in front of Next (the agents' other tools; nil: none). Its method set
// is session.Toolbox's.
type Tools struct {
	Recall *Recall
	// On reports memory.enabled now: turning it off withdraws the tool
	// from the next turn (and refuses a call already offered).
	On   func() bool
	Next interface {
		Tools(ctx context.Context, agentID string, actor authz.Actor) []model.Tool
		Call(ctx context.Context, agentID string, actor authz.Actor, call model.ToolCall) (string, error)
	}
}

var recallTool = model.Tool{
	Name:        ToolRecall,
	Description: "Search earlier messages (yours and users') in the conversations the user you act for can view, across resets. Returns time, conversation, author, excerpt and message id per hit, best first.",
	Parameters: map[string]any{"type": "object", "required": []string{"query"}, "properties": map[string]any{
		"query": map[string]any{"type": "string", "description": "words to look for"},
		"limit": map[string]any{"type": "integer", "description": "how many hits (default 5, at most 20)"},
	}},
}

// Tools lists the tools offered to a turn.
func (t Tools) Tools(ctx context.Context, agentID string, actor authz.Actor) []model.Tool {
	var out []model.Tool
	if t.On() {
		out = append(out, recallTool)
	}
	if t.Next != nil {
		out = append(out, t.Next.Tools(ctx, agentID, actor)...)
	}
	return out
}

// Call runs a tool call.
func (t Tools) Call(ctx context.Context, agentID string, actor authz.Actor, call model.ToolCall) (string, error) {
	if call.Name != ToolRecall {
		if t.Next == nil {
			return "", fmt.Errorf("tool %q is not available here", call.Name)
		}
		return t.Next.Call(ctx, agentID, actor, call)
	}
	if !t.On() {
		return "", &authz.Refusal{Msg: "memory is turned off"}
	}
	var args struct {
		Query string `json:"query"`
		Limit int    `json:"limit"`
	}
	if err := json.Unmarshal([]byte(call.Arguments), &args); err != nil {
		return "", fmt.Errorf("bad arguments for recall (want {\"query\": \"...\", \"limit\": 5}): %w", err)
	}
	fs, err := t.Recall.Search(ctx, actor.UserID, args.Query, args.Limit)
	if err != nil {
		return "", err
	}
	return Format(fs), nil
}

// Snippet is up to size bytes of text around the first word of query it
// contains (case-insensitive), with "…" where it was cut.
func Snippet(text, query string, size int) string {
	text = strings.Join(strings.Fields(text), " ")
	if len(text) <= size {
		return text
	}
	lower := strings.ToLower(text)
	at := -1
	for _, w := range strings.Fields(strings.ToLower(query)) {
		if i := strings.Index(lower, w); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	start := max(0, at-size/3)
	end := min(len(text), start+size)
	start = max(0, end-size)
	for start > 0 && !utf8.RuneStart(text[start]) {
		start++
	}
	for end < len(text) && !utf8.RuneStart(text[end]) {
		end--
	}
	out := strings.TrimSpace(text[start:end])
	if start > 0 {
		out = "…" + out
	}
	if end < len(text) {
		out += "…"
	}
	return out
}
