package scheduler

import (
	"errors"
	"fmt"
	"strings"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/sessionkey"
)

// UserError is a validation error whose text is meant for the user as is:
// it says what was wrong and what to write instead. It names no command:
// what would help next is its Hint, which the boundary showing it renders
// (Render).
type UserError struct {
	Msg string
	// Err is a sentinel it wraps (ErrNotFound, ErrBusy), if any.
	Err error
	// Hint, if set, names what would help next; JobID is the job it is
	// about, if any.
	Hint  Hint
	JobID string
}

func (e *UserError) Error() string { return e.Msg }

// UserMessage is the text for the person who asked (the same words, with
// no hint): a command boundary shows it, where it shows no other error's
// text; one that renders hints shows Render's text instead.
func (e *UserError) UserMessage() string { return e.Msg }

// Unwrap returns the wrapped sentinel.
func (e *UserError) Unwrap() error { return e.Err }

func userErrorf(format string, args ...any) error {
	return &UserError{Msg: fmt.Sprintf(format, args...)}
}

// Errors.
var (
	// ErrNotFound: no job with that id (wrapped in a *UserError by the API).
	ErrNotFound = errors.New("job not found")
	// ErrBusy: the job is running right now.
	ErrBusy = errors.New("job is running")
)

func notFound(id string) error {
	return &UserError{Msg: fmt.Sprintf("there is no job %q", id), Err: ErrNotFound, Hint: HintListJobs}
}

// ParseTo reads a delivery target: "channel:<id>" (a channel or thread),
// "user:<id>" (a DM) or a channel mention "<#id>", all on Discord; or a
// Matrix target (sessionkey.ParseMatrixTarget): "matrix:!room:server",
// "matrix:!room:server/$event" (a thread) or "matrix:@user:server" (a DM).
// The platform of the Discord forms is taken from like (the creating
// conversation) unless like is on Matrix, whose ids never look like them:
// then they name Discord. The account is like's when the platform is
// like's, else the default one.
func ParseTo(to string, like binding.ConversationRef) (binding.ConversationRef, error) {
	to = strings.TrimSpace(to)
	if ref, ok, err := sessionkey.ParseMatrixTarget(to); ok {
		if err != nil {
			return binding.ConversationRef{}, &UserError{Msg: err.Error()}
		}
		return onAccountOf(ref, like), nil
	}
	channel := binding.ConversationRef{Channel: like.Channel}.Normalize().Channel
	if channel == "" || channel == sessionkey.PlatformMatrix {
		channel = sessionkey.PlatformDiscord
	}
	ref := binding.ConversationRef{Channel: channel}
	switch {
	case strings.HasPrefix(to, "channel:") && isID(to[len("channel:"):]):
		ref.ConversationID = to[len("channel:"):]
	case strings.HasPrefix(to, sessionkey.DMPrefix) && isID(to[len(sessionkey.DMPrefix):]):
		ref.ConversationID = to
	case strings.HasPrefix(to, "<#") && strings.HasSuffix(to, ">") && isID(to[2:len(to)-1]):
		ref.ConversationID = to[2 : len(to)-1]
	default:
		return binding.ConversationRef{}, userErrorf("%q is not a delivery target: write `channel:<id>` for a channel or thread, or `user:<id>` for a DM", to)
	}
	return onAccountOf(ref, like), nil
}

// onAccountOf gives ref like's account when both are on one platform (the
// default account otherwise) and normalises it.
func onAccountOf(ref, like binding.ConversationRef) binding.ConversationRef {
	like = like.Normalize()
	if ref.Normalize().Channel == like.Channel {
		ref.AccountID = like.AccountID
	}
	return ref.Normalize()
}

func isID(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// FormatTo writes a conversation as a delivery target string (ParseTo
// reads it back).
func FormatTo(ref binding.ConversationRef) string {
	n := ref.Normalize()
	if n.Channel == sessionkey.PlatformMatrix {
		return sessionkey.FormatMatrixTarget(n)
	}
	id := n.ConversationID
	if strings.HasPrefix(id, sessionkey.DMPrefix) {
		return id
	}
	return "channel:" + strings.TrimPrefix(id, "channel:")
}

// conversationOfKey returns the conversation whose own session key is key
// (sessionkey.ConversationOf), on like's account when it is on like's
// platform.
func conversationOfKey(key string, like binding.ConversationRef) (binding.ConversationRef, bool) {
	_, ref, ok := sessionkey.ConversationOf(key)
	if !ok {
		return binding.ConversationRef{}, false
	}
	return onAccountOf(ref, like), true
}

func sameConversation(a, b binding.ConversationRef) bool {
	return a.Valid() && b.Valid() && a.Key() == b.Key()
}

// sessionTargetKey returns <key> of a "session:<key>" target.
func sessionTargetKey(target string) (string, bool) {
	k, ok := strings.CutPrefix(target, SessionTargetPrefix)
	return strings.TrimSpace(k), ok
}

// RequiredMode is the mode Rule 2 assigns to a job's target and delivery
// target: main is in-chat; isolated and current are background;
// session:<key> is in-chat when it delivers to <key>'s own conversation
// and background otherwise.
func RequiredMode(j Job) Mode {
	switch j.Target {
	case TargetMain:
		return ModeInChat
	case TargetIsolated, TargetCurrent:
		return ModeBackground
	}
	key, ok := sessionTargetKey(j.Target)
	if !ok {
		return ModeBackground
	}
	conv, ok := conversationOfKey(key, j.CreatedIn)
	if !ok {
		return ModeBackground
	}
	if j.To == "" {
		return ModeInChat
	}
	to, err := ParseTo(j.To, j.CreatedIn)
	if err != nil || !sameConversation(to, conv) {
		return ModeBackground
	}
	return ModeInChat
}

// chatOf is the conversation an in-chat job runs in: the creating chat for
// main, <key>'s own conversation for session:<key>.
func chatOf(j Job) (binding.ConversationRef, bool) {
	if j.Target == TargetMain {
		return j.CreatedIn.Normalize(), j.CreatedIn.Valid()
	}
	if key, ok := sessionTargetKey(j.Target); ok {
		return conversationOfKey(key, j.CreatedIn)
	}
	return binding.ConversationRef{}, false
}

// DeliveryTarget is where a job's output is posted: its chat for an in-chat
// job; `to` (or the creating conversation) for a background job.
func DeliveryTarget(j Job) (binding.ConversationRef, error) {
	if j.Mode() == ModeInChat {
		if c, ok := chatOf(j); ok {
			return c, nil
		}
		return binding.ConversationRef{}, fmt.Errorf("job %s: in-chat target %q names no conversation", j.ID, j.Target)
	}
	if j.To != "" {
		return ParseTo(j.To, j.CreatedIn)
	}
	if !j.CreatedIn.Valid() {
		return binding.ConversationRef{}, fmt.Errorf("job %s has no delivery target", j.ID)
	}
	return j.CreatedIn.Normalize(), nil
}

// resolveTarget validates target + to for a new job and returns the
// canonical target and its mode. An empty target means main, or isolated
// when `to` names another conversation.
func resolveTarget(target, to string, createdIn binding.ConversationRef) (string, Mode, error) {
	target = strings.TrimSpace(target)
	var toRef binding.ConversationRef
	if to != "" {
		var err error
		if toRef, err = ParseTo(to, createdIn); err != nil {
			return "", "", err
		}
	}
	elsewhere := to != "" && !sameConversation(toRef, createdIn)
	if target == "" {
		target = TargetMain
		if elsewhere {
			target = TargetIsolated
		}
	}
	lower := strings.ToLower(target)
	switch lower {
	case TargetMain:
		if !createdIn.Valid() {
			return "", "", userErrorf("target `main` runs in the chat the job is created in, and there is none here: use target `isolated` with `to` `channel:<id>`")
		}
		if elsewhere {
			return "", "", userErrorf("target `main` is an in-chat job: it runs in this chat and posts only here, so it cannot deliver to %s. "+
				"To post there, use target `isolated` (a fresh session each run) or `current` (a snapshot of this chat's recent history); "+
				"or leave out `to` to keep it in this chat", FormatTo(toRef))
		}
		return TargetMain, ModeInChat, nil
	case TargetIsolated, TargetCurrent:
		if to == "" && !createdIn.Valid() {
			return "", "", userErrorf("target `%s` needs somewhere to post its result: add `to` `channel:<id>` or `user:<id>`", lower)
		}
		if lower == TargetCurrent && !createdIn.Valid() {
			return "", "", userErrorf("target `current` snapshots the chat the job is created in, and there is none here: use `isolated`")
		}
		return lower, ModeBackground, nil
	}
	key, ok := sessionTargetKey(target)
	if !ok || key == "" {
		return "", "", userErrorf("%q is not a target: write `main` (in this chat), `isolated` (fresh session each run), `current` (snapshot of this chat) or `session:<key>`", target)
	}
	j := Job{Target: SessionTargetPrefix + key, To: to, CreatedIn: createdIn}
	mode := RequiredMode(j)
	if mode == ModeBackground && to == "" && !createdIn.Valid() {
		return "", "", userErrorf("session %q is not a chat's own session, so the job needs `to` `channel:<id>` or `user:<id>` for its result", key)
	}
	return j.Target, mode, nil
}
