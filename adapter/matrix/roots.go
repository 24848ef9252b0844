package matrix

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"maunium.net/go/mautrix/id"
)

// Thread roots come from the platform (invariant 18). A message's m.relates_to names its thread root, and that is
// the sender's content: "user:@victim:hs" or "!private:hs" there would route the message into someone's DM or
// another room's session if it were taken as a conversation id. A root is accepted only when it is a syntactically
// valid event id and an event of the message's own room: one the bot has seen in that room (handed by /sync, or
// posted by the bot) or one the homeserver returns for that room. A message whose root fails is ignored (it is
// shown in a thread of an event that is not there, so no conversation the bot serves displays it).

// ErrForeignRoot: a thread root that is not an event of the message's room (or no event id at all).
var ErrForeignRoot = errors.New("matrix: the thread root is not an event of this room")

// maxEventID is the longest event id the spec allows (255 bytes, like every other Matrix identifier).
const maxEventID = 255

// ValidEventID reports whether s is syntactically an event id: "$" and at least one more character, at most 255
// bytes of printable ASCII without spaces (room versions 1-2: "$local:server"; 3: standard base64; 4+: URL-safe).
func ValidEventID(s string) bool {
	if len(s) < 2 || len(s) > maxEventID || s[0] != '$' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c > '~' {
			return false
		}
	}
	return true
}

// knownEvents is a bounded set of (room, event) pairs the bot knows are events of that room, each with the thread
// root it was shown under ("" for none): what a redaction, which strips the content, no longer says.
type knownEvents struct {
	mu sync.Mutex
	m  map[string]string
}

const maxKnownEvents = 8192

func (k *knownEvents) add(room, ev, root string) {
	if room == "" || !ValidEventID(ev) {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil || len(k.m) >= maxKnownEvents {
		k.m = make(map[string]string, 256) // forget all at once: a miss costs one lookup
	}
	if old, ok := k.m[room+"\x00"+ev]; ok && root == "" {
		root = old // known as a thread root first, as a message of its thread later: keep the thread
	}
	k.m[room+"\x00"+ev] = root
}

func (k *knownEvents) has(room, ev string) bool {
	_, ok := k.rootOf(room, ev)
	return ok
}

// rootOf is the thread root ev was shown under, when ev is known.
func (k *knownEvents) rootOf(room, ev string) (string, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	root, ok := k.m[room+"\x00"+ev]
	return root, ok
}

// NoteEvent records that ev is an event of room, shown in the thread of root ("" for none; as the event claims:
// the claim is checked before anything is routed by it) (the /sync loop handed it, or the bot posted it).
func (c *Client) NoteEvent(room, ev, root string) { c.known.add(room, ev, root) }

// RootInRoom checks that root is an event of room: nil when it is, an error wrapping ErrForeignRoot when it is no
// event id or the homeserver has no such event in that room (403/404, or an event of another room), any other
// error when the homeserver could not say.
func (c *Client) RootInRoom(ctx context.Context, room, root string) error {
	if !ValidEventID(root) {
		return fmt.Errorf("%w: %q is no event id", ErrForeignRoot, root)
	}
	if c.known.has(room, root) {
		return nil
	}
	ev, err := c.bot.GetEvent(ctx, id.RoomID(room), id.EventID(root))
	if err != nil {
		err = classify("matrix: thread root "+root, err)
		if errors.Is(err, ErrDestinationGone) {
			return fmt.Errorf("%w: %w", ErrForeignRoot, err)
		}
		return err
	}
	if ev.RoomID.String() != room {
		return fmt.Errorf("%w: %s is an event of %s", ErrForeignRoot, root, ev.RoomID)
	}
	c.known.add(room, root, "")
	return nil
}
