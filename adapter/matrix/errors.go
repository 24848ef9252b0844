package matrix

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/agentbot/agentbot/core/delivery"
)

// Failure kinds of this package's sends. Each wraps the core/delivery sentinel of the same meaning, so
// errors.Is(err, delivery.ErrDestinationGone) holds for every error wrapping ErrDestinationGone.
var (
	// ErrDestinationGone: the room or thread cannot take the bot's messages any more: the homeserver answered 403
	// (a power-level lock, the bot kicked or banned) or 404 (no such room), or the thread root is redacted or
	// unknown. Permanent: the binding ends; the message is never re-routed to the room.
	ErrDestinationGone = fmt.Errorf("matrix: %w", delivery.ErrDestinationGone)
	// ErrForbidden: the bot's own credentials are refused (401: unknown or missing access token). Permanent.
	ErrForbidden = fmt.Errorf("matrix: %w", delivery.ErrForbidden)
	// ErrRejected: the homeserver refused the event itself (400, 413 M_TOO_LARGE). Permanent.
	ErrRejected = fmt.Errorf("matrix: %w", delivery.ErrRejected)
	// ErrTransient: 429, 5xx or a network failure outlived the client's retries.
	ErrTransient = fmt.Errorf("matrix: %w", delivery.ErrTransient)
)

// classify wraps err (from mautrix) with the failure kind it is, prefixed by op. A context error is returned
// wrapped as it is (the caller gave up; not a send failure kind).
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", op, err)
	}
	kind := ErrTransient
	var he mautrix.HTTPError
	if errors.As(err, &he) && he.Response != nil {
		switch code := he.Response.StatusCode; {
		case code == http.StatusForbidden, code == http.StatusNotFound:
			kind = ErrDestinationGone
		case code == http.StatusUnauthorized:
			kind = ErrForbidden
		case code == http.StatusTooManyRequests, code >= 500:
			kind = ErrTransient
		case code >= 400:
			kind = ErrRejected
		}
	}
	return fmt.Errorf("%s: %w: %w", op, kind, err)
}

// serverErrorRetries is how many times sendEvent sends again after an HTTP 500.
const serverErrorRetries = 3

// sendEvent is poster.SendMessageEvent, sent again (up to serverErrorRetries times, the wait doubling from the
// client's DefaultHTTPBackoff) while the homeserver answers 500. mautrix retries 429, 502, 503 and 504 by itself but
// not 500, which a homeserver answers for a passing failure of its own (a database hiccup); the transaction id
// makes the repeat safe (a homeserver that stored the event answers with it). Before, one 500 left a command's
// reply or a turn's answer undisplayed until the next recovery pass, minutes later.
func sendEvent(ctx context.Context, poster *mautrix.Client, room id.RoomID, evType event.Type, content any,
	req mautrix.ReqSendEvent) (*mautrix.RespSendEvent, error) {
	backoff := poster.DefaultHTTPBackoff
	if backoff <= 0 {
		backoff = 4 * time.Second // mautrix's own default
	}
	for retry := 0; ; retry++ {
		resp, err := poster.SendMessageEvent(ctx, room, evType, content, req)
		var he mautrix.HTTPError
		if err == nil || retry >= serverErrorRetries || !errors.As(err, &he) || he.Response == nil ||
			he.Response.StatusCode != http.StatusInternalServerError {
			return resp, err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
		backoff *= 2
	}
}
