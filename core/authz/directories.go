package authz

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentbot/agentbot/core/binding"
)

// ErrNoDirectory: no directory answers for the conversation's platform, so
// nobody's permissions there can be checked (the authority refuses).
var ErrNoDirectory = errors.New("no permission directory for the conversation's platform")

// Directories is the Directory of a process on several platforms: each
// question goes to the directory of the conversation's platform
// (binding.ConversationRef.Channel, "discord", "matrix"). A user id is
// asked about only on the platform of the conversation: a Discord user has
// no standing in a Matrix room unless Matrix's directory says so. A
// platform without a directory fails with ErrNoDirectory, and the
// authority refuses, saying so; nothing is asked of another platform's
// directory (whose ids would not name the conversation).
type Directories map[string]Directory

var _ Directory = Directories(nil)

func (ds Directories) of(conv binding.ConversationRef) (Directory, error) {
	platform := conv.Normalize().Channel
	for name, d := range ds {
		if d != nil && (binding.ConversationRef{Channel: name}).Normalize().Channel == platform {
			return d, nil
		}
	}
	names := slices.Sorted(maps.Keys(ds))
	return nil, fmt.Errorf("platform %q (directories: %s): %w", platform, strings.Join(names, ", "), ErrNoDirectory)
}

// Access asks the directory of conv's platform.
func (ds Directories) Access(ctx context.Context, userID string, conv binding.ConversationRef) (Access, error) {
	d, err := ds.of(conv)
	if err != nil {
		return Access{}, err
	}
	return d.Access(ctx, userID, conv)
}

// Member asks the directory of conv's platform.
func (ds Directories) Member(ctx context.Context, userID string, conv binding.ConversationRef) (Member, bool, error) {
	d, err := ds.of(conv)
	if err != nil {
		return Member{}, false, err
	}
	return d.Member(ctx, userID, conv)
}
