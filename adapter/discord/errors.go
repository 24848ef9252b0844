package discord

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/bwmarrin/discordgo"

	"github.com/agentbot/agentbot/core/delivery"
)

// Discord JSON error codes the bot reacts to.
const (
	codeUnknownChannel     = 10003
	codeUnknownMessage     = 10008
	codeUnknownWebhook     = 10015
	codeMissingAccess      = 50001
	codeEmptyMessage       = 50006
	codeMissingPerms       = 50013
	codeInvalidForm        = 50035
	codeThreadArchived     = 50083
	codeThreadLocked       = 160005
	codeMaxWebhooks        = 30007
	codeInvalidWebhook     = 50027 // invalid webhook token
	codeUnknownInteraction = 10062 // not answered within 3 s
	codeAlreadyAcked       = 40060 // interaction already acknowledged
)

// errWebhookUnusable marks a webhook failure after which a plain bot send
// is acceptable (the thread itself is fine).
var errWebhookUnusable = errors.New("webhook unusable")

// restCode returns the JSON error code and HTTP status of a discordgo error.
func restCode(err error) (code, status int, ok bool) {
	var re *discordgo.RESTError
	if !errors.As(err, &re) {
		return 0, 0, false
	}
	if re.Response != nil {
		status = re.Response.StatusCode
	}
	if re.Message != nil {
		code = re.Message.Code
	}
	return code, status, true
}

// classify maps a Discord failure onto the delivery sentinels: permanent
// ones (gone, forbidden, rejected) are never retried; everything else is
// transient and retryable.
func classify(err error) error {
	if err == nil {
		return nil
	}
	err = restError(err)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", delivery.ErrTransient, err)
	}
	var rl *discordgo.RateLimitError
	if errors.As(err, &rl) {
		return fmt.Errorf("%w: rate limited: %w", delivery.ErrTransient, err)
	}
	code, status, ok := restCode(err)
	if !ok {
		var ne net.Error
		if errors.As(err, &ne) {
			return fmt.Errorf("%w: network: %w", delivery.ErrTransient, err)
		}
		return fmt.Errorf("%w: %w", delivery.ErrTransient, err)
	}
	switch code {
	case codeUnknownChannel, codeThreadArchived, codeThreadLocked:
		return fmt.Errorf("%w: discord code %d: %w", delivery.ErrDestinationGone, code, err)
	case codeMissingAccess, codeMissingPerms:
		return fmt.Errorf("%w: discord code %d: %w", delivery.ErrForbidden, code, err)
	case codeInvalidForm, codeEmptyMessage:
		return fmt.Errorf("%w: discord code %d: %w", delivery.ErrRejected, code, err)
	case codeUnknownWebhook, codeInvalidWebhook, codeMaxWebhooks:
		return fmt.Errorf("%w: discord code %d: %w", errWebhookUnusable, code, err)
	}
	switch {
	case status == 404:
		return fmt.Errorf("%w: not found: %w", delivery.ErrDestinationGone, err)
	case status == 403:
		return fmt.Errorf("%w: forbidden: %w", delivery.ErrForbidden, err)
	case status == 429 || status >= 500:
		return fmt.Errorf("%w: http %d: %w", delivery.ErrTransient, status, err)
	case status >= 400:
		return fmt.Errorf("%w: http %d: %w", delivery.ErrRejected, status, err)
	}
	return fmt.Errorf("%w: %w", delivery.ErrTransient, err)
}

func retryable(err error) bool { return errors.Is(err, delivery.ErrTransient) }

// channelDeleted reports whether a read of a channel failed because the
// channel no longer exists (unknown channel, or 404): not archived or
// locked, which a read still returns.
func channelDeleted(err error) bool {
	code, status, ok := restCode(err)
	return ok && (code == codeUnknownChannel || status == http.StatusNotFound)
}
