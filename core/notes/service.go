package notes

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/transcript"
)

// Poster is the one send owner (core/delivery.Outbound): it posts a
// note's message and writes its transcript entry once confirmed.
type Poster interface {
	Deliver(ctx context.Context, d delivery.Delivery, commit delivery.CommitFunc) (delivery.Result, error)
}

// Deleter deletes a platform message (core/platform.Table): a message
// already gone is no error.
type Deleter interface {
	DeleteMessage(ctx context.Context, conv binding.ConversationRef, messageID string) error
}

// Changes is the transcript's deletion path (core/transcript.Service,
// invariant 17).
type Changes interface {
	Delete(ctx context.Context, messageID string) (bool, error)
	Locate(ctx context.Context, messageID string) (string, transcript.Entry, bool, error)
}

// Authority says who operates a conversation's server (core/authz.Authority).
type Authority interface {
	Operator(ctx context.Context, actor authz.Actor, target binding.ConversationRef) bool
}

// Places names a conversation's server: its Discord guild or Matrix room
// ("" for a DM or when unknown).
type Places interface {
	Place(ctx context.Context, conv binding.ConversationRef) (string, error)
}

// Options tune the Service.
type Options struct {
	// MaxText caps a note's text in characters (0: 500).
	MaxText int
	// PromptBytes is the budget of the notes given to a turn (0: 2000;
	// negative: none).
	PromptBytes int
}

// Deps are what the Service works with. On (nil: always) reports whether
// notes are on now (memory.enabled and memory.notes, reloaded by SIGHUP).
type Deps struct {
	Store     Store
	Poster    Poster
	Deleter   Deleter
	Changes   Changes
	Authority Authority
	Places    Places
	On        func() bool
	Clock     clock.Clock // nil: the real clock
	// NewID returns a fresh note id (nil: 8 random base32 characters).
	NewID func() string
	Log   zerolog.Logger
}

// Service writes, lists, forgets and gives out notes.
type Service struct {
	opt Options
	d   Deps
}

// New returns the Service; it does no I/O.
func New(o Options, d Deps) *Service {
	if o.MaxText <= 0 {
		o.MaxText = 500
	}
	if o.PromptBytes == 0 {
		o.PromptBytes = 2000
	}
	if d.Clock == nil {
		d.Clock = clock.Real{}
	}
	if d.NewID == nil {
		d.NewID = randomID
	}
	if d.On == nil {
		d.On = func() bool { return true }
	}
	return &Service{opt: o, d: d}
}

// On reports whether notes are on now.
func (s *Service) On() bool { return s.d.On() }

// ErrOff: notes are turned off (memory.enabled or memory.notes).
var ErrOff = &authz.Refusal{Msg: "notes are turned off here (memory.notes in the bot's config)"}

const idAlphabet = "abcdefghijkmnpqrstuvwxyz23456789" // no l, o, 0, 1: read aloud and typed back

func randomID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	for i := range b {
		b[i] = idAlphabet[int(b[i])%len(idAlphabet)]
	}
	return string(b)
}

// NormalizeID is a typed note id as stored (trimmed, lowercase).
func NormalizeID(id string) string { return strings.ToLower(strings.TrimSpace(id)) }

// Display is the message a note is: "📝 Noted (<scope>): <text> · note <id>".
func Display(scope Scope, text, id string) string {
	return displayPrefix(scope) + text + displaySuffix(id)
}

func displayPrefix(scope Scope) string { return "📝 Noted (" + string(scope) + "): " }
func displaySuffix(id string) string   { return " · note " + id }

// Remember posts a note in the conversation actor's turn runs in and
// records it once the platform confirmed the message. agentID is the
// agent speaking (the entry goes to its session only).
func (s *Service) Remember(ctx context.Context, actor authz.Actor, agentID, text string, scope Scope) (Note, error) {
	if !s.On() {
		return Note{}, ErrOff
	}
	conv := actor.Where.Normalize()
	if actor.UserID == "" || !conv.Valid() {
		return Note{}, &authz.Refusal{Msg: "no user's turn stands behind this note"}
	}
	text = strings.TrimSpace(text)
	if text == "" {
		return Note{}, &authz.Refusal{Msg: "the note is empty: say what to remember"}
	}
	if n := utf8.RuneCountInString(text); n > s.opt.MaxText {
		return Note{}, &authz.Refusal{Msg: fmt.Sprintf("the note is %d characters long; the limit is %d: keep it short", n, s.opt.MaxText)}
	}
	n := Note{ID: s.d.NewID(), Scope: scope, Author: actor.UserID, Conversation: conv, At: s.d.Clock.Now().UTC()}
	switch scope {
	case ScopeMe:
		n.About = actor.UserID
	case ScopeHere:
	case ScopeServer:
		server, err := s.server(ctx, actor, conv)
		if err != nil {
			return Note{}, err
		}
		n.Server = server
	default:
		_, err := ParseScope(string(scope))
		return Note{}, &authz.Refusal{Msg: err.Error()}
	}
	display := Display(scope, text, n.ID)
	res, err := s.d.Poster.Deliver(ctx, delivery.Delivery{ID: "note:" + n.ID, Target: conv, Text: display,
		Producer: delivery.Producer{Source: transcript.SourceNote, AgentID: agentID, Meta: map[string]string{"noteId": n.ID, "noteScope": string(scope)}}}, nil)
	if err != nil {
		return Note{}, fmt.Errorf("post note %s: %w", n.ID, err)
	}
	n.MessageIDs, n.SessionKey, n.Text = res.MessageIDs, res.SessionKey, text
	if res.Written {
		// What the chat shows (the send owner redacts secrets): the note
		// is that text, never more.
		shown, ok := strings.CutPrefix(res.Entry.Text, displayPrefix(scope))
		if shown, ok2 := strings.CutSuffix(shown, displaySuffix(n.ID)); ok && ok2 {
			n.Text = shown
		} else {
			n.Text = res.Entry.Text
		}
	}
	if len(n.MessageIDs) == 0 {
		return Note{}, fmt.Errorf("post note %s: the platform returned no message id", n.ID)
	}
	if err := s.d.Store.PutNote(ctx, n); err != nil {
		return Note{}, fmt.Errorf("record note %s: %w", n.ID, err)
	}
	// A deletion of the message between its confirmation and the record
	// found no note to forget: look again now the record is there.
	if _, e, ok, err := s.d.Changes.Locate(ctx, n.MessageIDs[0]); err == nil && ok && e.Deleted {
		if _, err := s.d.Store.DeleteNote(ctx, n.ID); err != nil {
			return Note{}, fmt.Errorf("forget note %s of a deleted message: %w", n.ID, err)
		}
		return Note{}, &authz.Refusal{Msg: "the note's message was deleted at once; nothing is remembered"}
	}
	return n, nil
}

// server is the server of conv for a server note, which only its
// operators write.
func (s *Service) server(ctx context.Context, actor authz.Actor, conv binding.ConversationRef) (string, error) {
	if authz.IsDM(conv) {
		return "", &authz.Refusal{Msg: "a direct message belongs to no server: use scope me or here"}
	}
	server := ""
	if s.d.Places != nil {
		var err error
		if server, err = s.d.Places.Place(ctx, conv); err != nil {
			return "", fmt.Errorf("find the server of this conversation: %w", err)
		}
	}
	if server == "" {
		return "", &authz.Refusal{Msg: "this conversation's server is not known: use scope me or here"}
	}
	if s.d.Authority == nil || !s.d.Authority.Operator(ctx, actor, conv) {
		return "", &authz.Refusal{Msg: "only an operator of this server may write a server note: use scope me or here"}
	}
	return server, nil
}

// Forget deletes note id's message on the platform and so forgets the
// note (the deletion path runs at once; the platform's own deletion event
// is a replay). Only its author, the user it is about, or an operator of
// the server it is displayed in may; a note displayed in a DM belongs to
// that DM's user alone.
func (s *Service) Forget(ctx context.Context, actor authz.Actor, id string) (Note, error) {
	if !s.On() {
		return Note{}, ErrOff
	}
	id = NormalizeID(id)
	n, ok, err := s.d.Store.Note(ctx, id)
	if err != nil {
		return Note{}, fmt.Errorf("look up note %s: %w", id, err)
	}
	if !ok || !s.mayForget(ctx, actor, n) {
		// One answer for both: a refusal does not tell that a note exists.
		return Note{}, &authz.Refusal{Msg: fmt.Sprintf("there is no note %q that you may forget (its author, the user it is about or an operator of its server may)", id)}
	}
	for _, mid := range n.MessageIDs {
		if err := s.d.Deleter.DeleteMessage(ctx, n.Conversation, mid); err != nil {
			return Note{}, fmt.Errorf("forget note %s: delete its message %s: %w", id, mid, err)
		}
	}
	for _, mid := range n.MessageIDs {
		if _, err := s.d.Changes.Delete(ctx, mid); err != nil {
			return Note{}, fmt.Errorf("forget note %s: record the deletion of message %s: %w", id, mid, err)
		}
	}
	// The deletion path forgot it (EraseEntry); a note whose message is
	// in no transcript (a Rule 1 exception) is forgotten here.
	if _, err := s.d.Store.DeleteNote(ctx, id); err != nil {
		return Note{}, fmt.Errorf("forget note %s: %w", id, err)
	}
	return n, nil
}

func (s *Service) mayForget(ctx context.Context, actor authz.Actor, n Note) bool {
	switch {
	case actor.UserID == "":
		return false
	case actor.UserID == n.Author || (n.About != "" && actor.UserID == n.About):
		return true
	case authz.IsDM(n.Conversation):
		return false // a DM belongs to its user alone, operators included
	}
	return s.d.Authority != nil && s.d.Authority.Operator(ctx, authz.Actor{UserID: actor.UserID, Where: n.Conversation}, n.Conversation)
}

// EraseEntry forgets the notes a deleted entry displayed
// (transcript.Eraser: the deletion path calls it for every deleted
// message, by anyone).
func (s *Service) EraseEntry(ctx context.Context, e transcript.Entry) error {
	for _, mid := range e.MessageIDs {
		gone, err := s.d.Store.DeleteNotesByMessage(ctx, mid)
		if err != nil {
			return fmt.Errorf("forget the notes of message %s: %w", mid, err)
		}
		for _, n := range gone {
			s.d.Log.Info().Str("note", n.ID).Str("message", mid).Msg("note forgotten: its message was deleted")
		}
	}
	return nil
}

// InScope returns the notes given to a turn userID starts in conv: `me`
// notes about userID, `here` notes of conv, `server` notes of conv's
// server; newest first. With public, only those whose message everyone in
// conv may have seen (the caller's `me` notes displayed elsewhere are
// left out): for answers the whole conversation sees.
func (s *Service) InScope(ctx context.Context, userID string, conv binding.ConversationRef, public bool) ([]Note, error) {
	conv = conv.Normalize()
	f := Filter{About: userID, Conversation: conv.Key()}
	if f.About == "" {
		f.About = "\x00" // never the zero Filter (every note)
	}
	if !authz.IsDM(conv) && s.d.Places != nil {
		server, err := s.d.Places.Place(ctx, conv)
		if err != nil {
			s.d.Log.Warn().Err(err).Str("conversation", conv.ConversationID).Msg("notes: server of the conversation unknown; its server notes are left out")
		}
		f.Server = server
	}
	ns, err := s.d.Store.Notes(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("notes in scope: %w", err)
	}
	if public {
		ns = slices.DeleteFunc(ns, func(n Note) bool { return n.Scope == ScopeMe && n.Conversation.Key() != conv.Key() })
	}
	slices.Reverse(ns)
	return ns, nil
}

// Prompt is the notes section of the system prompt of a turn userID
// starts in conv: the notes in scope, newest first, whole notes up to the
// byte budget; "" when notes are off or none is in scope. A failure to
// read them is logged and gives none: a turn is not refused for its notes.
func (s *Service) Prompt(ctx context.Context, userID string, conv binding.ConversationRef) string {
	if !s.On() || s.opt.PromptBytes < 0 {
		return ""
	}
	ns, err := s.InScope(ctx, userID, conv, false)
	if err != nil {
		s.d.Log.Warn().Err(err).Msg("notes left out of the turn")
		return ""
	}
	return FormatPrompt(ns, s.opt.PromptBytes)
}

const promptHeader = "\n\nNotes you were asked to remember (each is a message in its chat; forget {id} deletes it):"

// FormatPrompt renders notes (newest first) for the system prompt: whole
// notes while their lines fit in budget bytes, then how many were left out.
func FormatPrompt(ns []Note, budget int) string {
	if len(ns) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(promptHeader)
	shown, used := 0, 0
	for _, n := range ns {
		line := "\n- [" + n.ID + "] (" + string(n.Scope) + ") " + n.Text
		if used+len(line) > budget {
			break
		}
		b.WriteString(line)
		used += len(line)
		shown++
	}
	if shown == 0 {
		return ""
	}
	if rest := len(ns) - shown; rest > 0 {
		fmt.Fprintf(&b, "\n(%d older notes are not shown: recall finds them.)", rest)
	}
	return b.String()
}

// IsRefusal reports whether err is a refusal to show the user as it is.
func IsRefusal(err error) bool {
	var r *authz.Refusal
	return errors.As(err, &r)
}
