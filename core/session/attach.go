package session

import (
	"context"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/model"
)

// Fetcher fetches a user attachment's bytes, at most max of them (the
// Discord adapter: Discord's CDN hosts only, within a time limit).
type Fetcher interface {
	Fetch(ctx context.Context, a transcript.Attachment, max int64) ([]byte, error)
}

// Attachment limits: text-like files up to MaxInlineText bytes are inlined
// into the text the model sees; images up to MaxImageBytes go to vision
// models. Larger files are named, not fetched.
const (
	MaxInlineText = 64 << 10
	MaxImageBytes = 5 << 20
)

var textExts = map[string]bool{
	".txt": true, ".md": true, ".markdown": true, ".csv": true, ".tsv": true, ".log": true, ".json": true,
	".yaml": true, ".yml": true, ".toml": true, ".ini": true, ".xml": true, ".html": true, ".css": true,
	".go": true, ".py": true, ".js": true, ".ts": true, ".rs": true, ".java": true, ".c": true, ".h": true,
	".cpp": true, ".rb": true, ".sh": true, ".sql": true, ".diff": true, ".patch": true,
}

func mediaType(ct string) string {
	ct, _, _ = strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(ct))
}

// IsImage reports whether a is a picture a vision model takes.
func IsImage(a transcript.Attachment) bool {
	switch mediaType(a.ContentType) {
	case "image/png", "image/jpeg", "image/webp", "image/gif":
		return true
	}
	return false
}

// IsText reports whether a is text-like (by content type or extension).
func IsText(a transcript.Attachment) bool {
	ct := mediaType(a.ContentType)
	switch {
	case strings.HasPrefix(ct, "text/"), ct == "application/json", ct == "application/xml", ct == "application/yaml",
		ct == "application/x-yaml", ct == "application/toml", ct == "application/javascript":
		return true
	}
	return textExts[strings.ToLower(path.Ext(a.Filename))]
}

func describeAttachment(a transcript.Attachment) string {
	ct := a.ContentType
	if ct == "" {
		ct = "unknown type"
	}
	return fmt.Sprintf("%s (%s, %d bytes)", a.Filename, ct, a.Size)
}

// withAttachments adds a user entry's attachments to its model message:
// text-like files inlined (whatever vision says), images as image parts
// for a vision model and named otherwise, anything else named. Fetched
// bytes come from the manager's cache (fetched once) and count against
// *left, the request's remaining attachment bytes: a file that does not
// fit is named only.
func (m *Manager) withAttachments(ctx context.Context, agent Agent, msg model.Message, as []transcript.Attachment, left *int64) model.Message {
	var notes []string
	over := func(kind string, a transcript.Attachment) bool {
		if a.Size > *left {
			notes = append(notes, fmt.Sprintf("[%s %s: not shown, over this request's attachment limit]", kind, describeAttachment(a)))
			return true
		}
		return false
	}
	take := func(data []byte) { *left -= int64(len(data)) }
	for _, a := range as {
		switch {
		case IsImage(a) && !agent.Vision:
			notes = append(notes, "[image "+describeAttachment(a)+": this model does not see images]")
		case IsImage(a) && a.Size > MaxImageBytes:
			notes = append(notes, fmt.Sprintf("[image %s: not shown, over the %d MiB limit]", describeAttachment(a), MaxImageBytes>>20))
		case IsImage(a):
			if over("image", a) {
				continue
			}
			data, err := m.fetch(ctx, a, MaxImageBytes)
			if err == nil && int64(len(data)) > *left {
				notes = append(notes, fmt.Sprintf("[image %s: not shown, over this request's attachment limit]", describeAttachment(a)))
				continue
			}
			take(data)
			if err != nil {
				notes = append(notes, "[image "+describeAttachment(a)+": could not be fetched]")
				continue
			}
			msg.Images = append(msg.Images, model.Image{MediaType: mediaType(a.ContentType), Data: data})
			notes = append(notes, "[image "+describeAttachment(a)+": attached]")
		case IsText(a) && a.Size > MaxInlineText:
			notes = append(notes, fmt.Sprintf("[file %s: not shown, over the %d KiB limit]", describeAttachment(a), MaxInlineText>>10))
		case IsText(a):
			if over("file", a) {
				continue
			}
			data, err := m.fetch(ctx, a, MaxInlineText)
			if err == nil && int64(len(data)) > *left {
				notes = append(notes, fmt.Sprintf("[file %s: not shown, over this request's attachment limit]", describeAttachment(a)))
				continue
			}
			take(data)
			if err != nil || !utf8.Valid(data) {
				notes = append(notes, "[file "+describeAttachment(a)+": could not be read as text]")
				continue
			}
			notes = append(notes, "[file "+describeAttachment(a)+":]\n"+string(data)+"\n[end of "+a.Filename+"]")
		default:
			notes = append(notes, "[file "+describeAttachment(a)+": not shown]")
		}
	}
	if len(notes) > 0 {
		msg.Text = model.JoinText(msg.Text, strings.Join(notes, "\n"))
	}
	return msg
}

// fetch returns an attachment's bytes, fetched once per attachment
// (attachcache.go), not once per turn whose history holds it.
func (m *Manager) fetch(ctx context.Context, a transcript.Attachment, max int64) ([]byte, error) {
	if m.d.Fetcher == nil {
		return nil, fmt.Errorf("fetch attachment %s: no fetcher", a.Filename)
	}
	data, err := m.attach.get(ctx, a, max, func() ([]byte, error) { return m.d.Fetcher.Fetch(ctx, a, max) })
	if err != nil {
		m.d.Log.Warn().Err(err).Str("file", a.Filename).Msg("attachment not fetched")
		return nil, err
	}
	return data, nil
}
