package sessionkey

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/agentbot/agentbot/core/binding"
)

// MatrixTargetPrefix starts a Matrix delivery target.
const MatrixTargetPrefix = "matrix:"

// MatrixTargetHelp is how to write a Matrix delivery target.
const MatrixTargetHelp = "write matrix:!room:server for a room, matrix:!room:server/$event for the thread under that root event, or matrix:@user:server for a DM"

// ParseMatrixTarget reads a Matrix delivery target, for every parser of
// targets (session.Manager.ParseTarget, scheduler.ParseTo):
//
//	matrix:!room:server          a room
//	matrix:!room:server/$event   the thread whose root is $event in that room
//	matrix:@user:server          a DM with that user
//
// The same ids are accepted without "matrix:" (the sigils '!', '$' and '@'
// with a server name are Matrix's own), and after "channel:" or "user:",
// the Discord forms' words. matched is false when to is none of these (the
// caller reads its other forms, with its own error text); err is set when
// to is Matrix-shaped but not a whole target (say a thread without its
// room). The ref has Channel "matrix" and no account: the caller sets it.
func ParseMatrixTarget(to string) (ref binding.ConversationRef, matched bool, err error) {
	to = strings.TrimSpace(to)
	id, explicit := cutPrefixFold(to, MatrixTargetPrefix)
	if !explicit {
		switch {
		case strings.HasPrefix(to, "channel:!"), strings.HasPrefix(to, "channel:$"):
			id = to[len("channel:"):]
		case strings.HasPrefix(to, DMPrefix+"@") && strings.Contains(to[len(DMPrefix):], ":"):
			id = to[len(DMPrefix):]
		case strings.HasPrefix(to, "$"):
			id = to
		case (strings.HasPrefix(to, "!") || strings.HasPrefix(to, "@")) && strings.Contains(to, ":"):
			id = to
		default:
			return binding.ConversationRef{}, false, nil
		}
	}
	bad := func(why string) (binding.ConversationRef, bool, error) {
		return binding.ConversationRef{}, true, fmt.Errorf("target %q: %s: %s", to, why, MatrixTargetHelp)
	}
	ref = binding.ConversationRef{Channel: PlatformMatrix}
	switch {
	case strings.HasPrefix(id, "@"):
		if !validMatrixID(id, '@', true) {
			return bad("not a Matrix user id")
		}
		ref.ConversationID = DMPrefix + id
	case strings.HasPrefix(id, "$"):
		return bad("a thread needs its room")
	case strings.HasPrefix(id, "!"):
		room, ev, thread := strings.Cut(id, ThreadSep+"$")
		if !validMatrixID(room, '!', true) {
			return bad("not a Matrix room id")
		}
		ref.ConversationID = room
		if thread {
			if ev = "$" + ev; !validMatrixID(ev, '$', false) {
				return bad("not a Matrix event id")
			}
			ref.ConversationID, ref.ParentConversationID = ev, room
		}
	default:
		return bad("not a Matrix room or user id")
	}
	return ref.Normalize(), true, nil
}

// FormatMatrixTarget writes a Matrix conversation as its delivery target
// (ParseMatrixTarget reads it back): matrix:!room:server,
// matrix:!room:server/$event or matrix:@user:server.
func FormatMatrixTarget(ref binding.ConversationRef) string {
	n := ref.Normalize()
	if user, ok := strings.CutPrefix(n.ConversationID, DMPrefix); ok {
		return MatrixTargetPrefix + user
	}
	if isMatrixThread(n.Channel, n.ConversationID) && n.ParentConversationID != "" {
		return MatrixTargetPrefix + n.ParentConversationID + ThreadSep + n.ConversationID
	}
	return MatrixTargetPrefix + n.ConversationID
}

// validMatrixID checks the shape of a Matrix identifier: its sigil, a
// non-empty opaque part, and (withServer) ":" and a server name, without
// spaces or control characters; a server name has no '/'.
func validMatrixID(id string, sigil byte, withServer bool) bool {
	if len(id) < 2 || id[0] != sigil {
		return false
	}
	for _, c := range id {
		if unicode.IsSpace(c) || unicode.IsControl(c) {
			return false
		}
	}
	if !withServer {
		return true
	}
	local, server, ok := strings.Cut(id[1:], ":")
	return ok && local != "" && server != "" && !strings.Contains(server, "/")
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return s, false
}
