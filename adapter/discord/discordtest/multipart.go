package discordtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/url"
	"regexp"
	"strconv"
)

// Upload limits enforced by the emulator (Discord's for a bot in a guild
// without boosts).
const (
	MaxUploadBytes = 10 << 20 // per request, files together
	maxFiles       = 10
)

// upload is one files[n] part of a multipart request.
type upload struct {
	n    int
	file File
}

var filePart = regexp.MustCompile(`^files\[(\d+)\]$`)

// multipartBoundary reports whether the request body is multipart/form-data
// (and its boundary).
func (c *call) multipartBoundary() (string, bool) {
	mt, params, err := mime.ParseMediaType(c.r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		return "", false
	}
	return params["boundary"], true
}

// decodeMultipart reads a multipart/form-data body as Discord does: the
// JSON body in the payload_json part (required here), each file in a
// files[n] part with a filename; any other part, a repeated n, more than
// maxFiles files or more than MaxUploadBytes is an error. Files are
// taken only where the route accepts them (c.acceptFiles).
func (c *call) decodeMultipart(boundary string, v any) reply {
	mr := multipart.NewReader(bytes.NewReader(c.body), boundary)
	var payload []byte
	seen := map[int]bool{}
	total := 0
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fail(400, 50109, "The request body contains an invalid multipart form.")
		}
		data, err := io.ReadAll(p)
		if err != nil {
			return fail(400, 50109, "The request body contains an invalid multipart form.")
		}
		name := p.FormName()
		if name == "payload_json" {
			payload = data
			continue
		}
		m := filePart.FindStringSubmatch(name)
		if m == nil {
			return formError(name, "UNKNOWN_FIELD", "The form has a part Discord does not take: "+strconv.Quote(name))
		}
		n, _ := strconv.Atoi(m[1])
		if seen[n] || p.FileName() == "" {
			return formError(name, "BASE_TYPE_BAD_FILE", "Each files[n] part is one file with a filename.")
		}
		seen[n] = true
		total += len(data)
		if total > MaxUploadBytes {
			return fail(413, 40005, "Request entity too large")
		}
		c.uploads = append(c.uploads, upload{n: n, file: File{Name: p.FileName(), ContentType: p.Header.Get("Content-Type"), Data: data}})
	}
	if len(c.uploads) > 0 && !c.acceptFiles {
		return fail(400, 50109, "discordtest: this route takes no files in the emulator")
	}
	if len(c.uploads) > maxFiles {
		return formError("files", "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Must be %d or fewer in length.", maxFiles))
	}
	if payload == nil {
		return fail(400, 50109, "discordtest: a multipart body needs its payload_json part")
	}
	if err := json.Unmarshal(payload, v); err != nil {
		return fail(400, 50109, "The request body contains invalid JSON.")
	}
	return reply{}
}

// attachUploadsLocked stores the call's files on m, served like user
// attachments. Every attachments entry of the body must name an uploaded
// files[n] by its n, as Discord requires for new files.
func (e *Emulator) attachUploadsLocked(c *call, b *msgBody, m *Message) reply {
	if b.Attachments != nil {
		byN := map[string]bool{}
		for _, u := range c.uploads {
			byN[strconv.Itoa(u.n)] = true
		}
		for _, a := range *b.Attachments {
			if !byN[a.id()] {
				return formError("attachments", "ATTACHMENT_NOT_FOUND", "Unknown attachment "+a.id())
			}
		}
	}
	for _, u := range c.uploads {
		id := e.nextIDLocked()
		p := "/attachments/" + m.ChannelID + "/" + id + "/" + url.PathEscape(u.file.Name)
		e.world.files[p] = u.file
		m.Attachments = append(m.Attachments, Attachment{ID: id, Filename: u.file.Name, ContentType: u.file.ContentType, Size: len(u.file.Data),
			URL: e.baseURL + p + "?ex=0&is=0&hm=emulator"})
	}
	return reply{}
}

// attachmentRef is an attachments entry of a body: {id, filename, ...};
// id is the files[n] index of a new file or the id of a kept one.
type attachmentRef struct {
	ID json.RawMessage `json:"id"`
}

func (a attachmentRef) id() string {
	var s string
	if json.Unmarshal(a.ID, &s) == nil {
		return s
	}
	return string(a.ID)
}

// keepAttachments applies an edit's attachments list: only the files it
// names stay (no list: all stay, as on Discord).
func keepAttachments(refs *[]attachmentRef, have []Attachment) []Attachment {
	if refs == nil {
		return have
	}
	keep := map[string]bool{}
	for _, r := range *refs {
		keep[r.id()] = true
	}
	var out []Attachment
	for _, a := range have {
		if keep[a.ID] {
			out = append(out, a)
		}
	}
	return out
}

// jsonPart is a request's JSON body: the payload_json part of a
// multipart body, else the body itself.
func jsonPart(req Request) []byte {
	mt, params, err := mime.ParseMediaType(req.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		return req.Body
	}
	mr := multipart.NewReader(bytes.NewReader(req.Body), params["boundary"])
	for {
		p, err := mr.NextPart()
		if err != nil {
			return nil
		}
		if p.FormName() == "payload_json" {
			b, _ := io.ReadAll(p)
			return b
		}
	}
}
