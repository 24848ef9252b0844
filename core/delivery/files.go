package delivery

import (
	"context"
	"fmt"
	"unicode/utf8"

	"github.com/agentbot/agentbot/core/transcript"
)

// File is a file a delivery attaches to its first message (an ACP
// command's full output). Its bytes are kept in the outbox record with
// the delivery, so a resend after a crash attaches the same file
// (invariant 2: the payload is fixed at its first attempt).
type File struct {
	Name        string `json:"name"`
	ContentType string `json:"contentType"`
	Data        []byte `json:"data"`
}

// MaxFileBytes bounds the files of one delivery together: under
// Discord's upload limit for bots (10 MiB) with room for the form, well
// under a homeserver's usual media limit; and what one outbox record
// holds at most.
const MaxFileBytes = 8 << 20

// MaxFiles is the most files one delivery attaches (Discord takes 10).
const MaxFiles = 10

// FilePoster is a LiveSender that can attach files: PostLiveFiles posts
// the first part of live delivery d showing text with controls c and
// d.Files attached, under the same idempotency key as PostLive's part 0
// (a repeat returns the message an earlier attempt created, never a
// second one), and returns its id and the files as the platform shows
// them (name, type, size, and the URL the platform gave each one: the
// transcript entry records them like a user message's attachments).
// EditLive of such a message keeps its files.
type FilePoster interface {
	PostLiveFiles(ctx context.Context, d Delivery, text string, c Controls) (messageID string, shown []transcript.Attachment, err error)
}

// checkFiles says why d's files cannot be sent (nil when they can, or
// when there are none).
func checkFiles(d Delivery) error {
	if len(d.Files) > MaxFiles {
		return fmt.Errorf("delivery %s attaches %d files (at most %d): %w", d.ID, len(d.Files), MaxFiles, ErrRejected)
	}
	total := 0
	for _, f := range d.Files {
		if f.Name == "" {
			return fmt.Errorf("delivery %s attaches a file without a name: %w", d.ID, ErrRejected)
		}
		total += len(f.Data)
	}
	if total > MaxFileBytes {
		return fmt.Errorf("delivery %s attaches %d bytes (at most %d): %w", d.ID, total, MaxFileBytes, ErrRejected)
	}
	return nil
}

// redactFiles redacts the text files of d (invariant 14: a file shown in
// the chat is text the bot sends as much as a message is). A file that
// is not UTF-8 text is sent as is.
func (o *Outbound) redactFiles(files []File) []File {
	if o.redact == nil || len(files) == 0 {
		return files
	}
	out := make([]File, len(files))
	for i, f := range files {
		if utf8.Valid(f.Data) {
			f.Data = []byte(o.redact.String(string(f.Data)))
		}
		out[i] = f
	}
	return out
}

// postFiles posts part 0 of a live delivery with its files through the
// sender's FilePoster, recording the files as shown.
func (l *Live) postFiles(ctx context.Context, text string, c Controls) (string, error) {
	fp, ok := l.ls.(FilePoster)
	if !ok {
		return "", fmt.Errorf("live delivery %s: platform %q cannot attach files: %w", l.d.ID, l.d.Target.Channel, ErrRejected)
	}
	if err := checkFiles(l.d); err != nil {
		return "", err
	}
	id, shown, err := fp.PostLiveFiles(ctx, l.d, text, c)
	if err != nil {
		return "", err
	}
	l.rec.Attachments = shown
	return id, nil
}
