package discord

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/agentbot/agentbot/core/transcript"
)

// cdnHosts are where Discord serves attachments; nothing else is fetched
// (a message's attachment URL is the only input, and it must not make the
// bot a proxy into the network it runs in).
var cdnHosts = map[string]bool{"cdn.discordapp.com": true, "media.discordapp.net": true}

// fetchTimeout bounds one attachment download.
const fetchTimeout = 15 * time.Second

// attachmentsOf maps a message's attachments for the transcript.
func attachmentsOf(m *discordgo.Message) []transcript.Attachment {
	var out []transcript.Attachment
	for _, at := range m.Attachments {
		if at == nil {
			continue
		}
		out = append(out, transcript.Attachment{Filename: at.Filename, ContentType: at.ContentType, Size: int64(at.Size), URL: at.URL})
	}
	return out
}

// allowedHost: Discord's CDN over https, or the host of discord.apiURL (a
// REST proxy or the test emulator, which serves attachments itself).
func (c *Client) allowedHost(u *url.URL) bool {
	if u.Scheme == "https" && cdnHosts[strings.ToLower(u.Hostname())] {
		return true
	}
	if c.opt.APIURL == "" {
		return false
	}
	api, err := url.Parse(c.opt.APIURL)
	return err == nil && api.Host != "" && strings.EqualFold(api.Host, u.Host) && api.Scheme == u.Scheme
}

// Fetch implements session.Fetcher: at most max bytes of an attachment
// from Discord's CDN, within fetchTimeout, with no bot token and no
// redirect off the CDN. Errors name the file, never the signed URL.
func (c *Client) Fetch(ctx context.Context, at transcript.Attachment, max int64) ([]byte, error) {
	u, err := url.Parse(at.URL)
	if err != nil || !c.allowedHost(u) {
		return nil, fmt.Errorf("fetch %s: not a Discord CDN URL", at.Filename)
	}
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", at.Filename, err)
	}
	base := c.opt.BaseTransport
	if base == nil {
		base = http.DefaultTransport
	}
	client := &http.Client{Transport: base, CheckRedirect: func(r *http.Request, _ []*http.Request) error {
		if !c.allowedHost(r.URL) {
			return errors.New("redirect off the CDN")
		}
		return nil
	}}
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("fetch %s: %w", at.Filename, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch %s: HTTP %d", at.Filename, resp.StatusCode)
	}
	if resp.ContentLength > max {
		return nil, fmt.Errorf("fetch %s: %d bytes, over the %d limit", at.Filename, resp.ContentLength, max)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", at.Filename, err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("fetch %s: over the %d byte limit", at.Filename, max)
	}
	return data, nil
}
