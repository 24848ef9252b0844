package matrix

import (
	"context"
	"encoding/json"
	"fmt"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/transcript"
)

var _ delivery.FilePoster = DeliverySender{}

// PostLiveFiles implements delivery.FilePoster: the file is uploaded to the homeserver's media repository, then
// posted as one m.file event (in the thread, as PostLive posts part 0) whose body is text, the caption (Matrix
// 1.10: a body beside a different filename is the file's caption). Its transaction id and delivery mark are part
// 0's, so a repeat is deduped by the homeserver and a resend after a restart finds the event an earlier attempt
// posted (an upload repeated then is left unused). One file per message: Matrix events carry one.
func (s DeliverySender) PostLiveFiles(ctx context.Context, d delivery.Delivery, text string, c delivery.Controls) (string, []transcript.Attachment, error) {
	if len(d.Files) != 1 {
		return "", nil, fmt.Errorf("matrix: live %s: %w: a Matrix message carries one file, not %d", d.ID, ErrRejected, len(d.Files))
	}
	m, err := liveMessage(d, c)
	if err == nil {
		m, err = s.Client.resolveDM(ctx, m)
	}
	if err != nil {
		return "", nil, err
	}
	m.Text = text
	return s.Client.postFile(ctx, m, d.Files[0])
}

// fileContent is what an m.file event says of its file.
type fileContent struct {
	MsgType  string   `json:"msgtype"`
	Filename string   `json:"filename"`
	URL      string   `json:"url"`
	Info     fileInfo `json:"info"`
}

type fileInfo struct {
	MimeType string `json:"mimetype,omitempty"`
	Size     int64  `json:"size"`
}

// fields are the content fields of the file (for a post, and kept by an edit).
func (f fileContent) fields() map[string]any {
	return map[string]any{"msgtype": "m.file", "filename": f.Filename, "url": f.URL, "info": f.Info}
}

// postFile posts m.Text as the caption of file f in part 0 of delivery m.DeliveryID and returns the event id and
// the file as the event shows it (read back: a deduped post shows the first attempt's upload).
func (c *Client) postFile(ctx context.Context, m Message, f delivery.File) (string, []transcript.Attachment, error) {
	if m.DeliveryID == "" || m.RoomID == "" {
		return "", nil, fmt.Errorf("matrix: post file: %w: delivery id and room are required", ErrRejected)
	}
	poster, err := c.poster(ctx, m.RoomID, m.Persona)
	if err != nil {
		return "", nil, err
	}
	if m.ThreadRoot != "" {
		if err := c.checkRoot(ctx, m.RoomID, m.ThreadRoot); err != nil {
			return "", nil, err
		}
	}
	evID := ""
	if m.Resend {
		found, err := c.findParts(ctx, poster, m)
		if err != nil {
			return "", nil, err
		}
		evID = found[0]
	}
	if evID == "" {
		up, err := poster.UploadBytesWithName(ctx, f.Data, f.ContentType, f.Name)
		if err != nil {
			return "", nil, classify(fmt.Sprintf("matrix: upload %s of %s", f.Name, m.DeliveryID), err)
		}
		raw, err := c.partContent(m, Defuse(c.personaPrefix(m.Persona)+m.Text), 0, 0)
		if err != nil {
			return "", nil, err
		}
		var content map[string]any
		if err := json.Unmarshal(raw, &content); err != nil {
			return "", nil, fmt.Errorf("matrix: post file %s: %w: %w", m.DeliveryID, ErrRejected, err)
		}
		for k, v := range (fileContent{Filename: f.Name, URL: up.ContentURI.String(), Info: fileInfo{MimeType: f.ContentType, Size: int64(len(f.Data))}}).fields() {
			content[k] = v
		}
		resp, err := poster.SendMessageEvent(ctx, id.RoomID(m.RoomID), event.EventMessage, content,
			mautrix.ReqSendEvent{TransactionID: txnID(m.DeliveryID, 0)})
		if err != nil {
			return "", nil, classify(fmt.Sprintf("matrix: post %s with %s", m.DeliveryID, f.Name), err)
		}
		evID = resp.EventID.String()
		c.known.add(m.RoomID, evID, m.ThreadRoot)
		c.clearTyping(ctx, m.RoomID)
	}
	fc, err := c.fileOf(ctx, poster, m.RoomID, evID)
	if err != nil {
		return "", nil, err
	}
	return evID, []transcript.Attachment{{Filename: fc.Filename, ContentType: fc.Info.MimeType, Size: fc.Info.Size, URL: fc.URL}}, nil
}

// fileOf reads the file an m.file event shows.
func (c *Client) fileOf(ctx context.Context, poster *mautrix.Client, roomID, eventID string) (fileContent, error) {
	ev, err := poster.GetEvent(ctx, id.RoomID(roomID), id.EventID(eventID))
	if err != nil {
		return fileContent{}, classify("matrix: read file event "+eventID, err)
	}
	var fc fileContent
	if err := json.Unmarshal(ev.Content.VeryRaw, &fc); err != nil || fc.MsgType != "m.file" || fc.URL == "" {
		return fileContent{}, fmt.Errorf("matrix: event %s is not a file message: %w", eventID, ErrRejected)
	}
	return fc, nil
}

// editFile makes file message eventID show caption text, keeping its file (an m.replace edit whose new content
// is the same m.file with the new body).
func (c *Client) editFile(ctx context.Context, roomID, eventID, text string) error {
	poster, err := c.poster(ctx, roomID, Persona{})
	if err != nil {
		return err
	}
	fc, err := c.fileOf(ctx, poster, roomID, eventID)
	if err != nil {
		return err
	}
	_, err = c.edit(ctx, roomID, eventID, text, "", Persona{}, fc.fields())
	return err
}
