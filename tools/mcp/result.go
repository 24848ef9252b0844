package mcp

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// resultText is what the model reads of a tool result: the text content,
// images, audio and resources summarised in one line each, structured
// content as JSON when there is no content; at most max bytes.
func resultText(res *sdk.CallToolResult, max int) string {
	var parts []string
	for _, c := range res.Content {
		switch v := c.(type) {
		case *sdk.TextContent:
			parts = append(parts, v.Text)
		case *sdk.ImageContent:
			parts = append(parts, fmt.Sprintf("[image %s, %d bytes, not shown]", v.MIMEType, len(v.Data)))
		case *sdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio %s, %d bytes, not shown]", v.MIMEType, len(v.Data)))
		case *sdk.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource link %s %q %s]", v.URI, v.Name, v.MIMEType))
		case *sdk.EmbeddedResource:
			if r := v.Resource; r != nil {
				size := len(r.Text) + len(r.Blob)
				parts = append(parts, fmt.Sprintf("[resource %s %s, %d bytes, not shown]", r.URI, r.MIMEType, size))
			}
		default:
			parts = append(parts, fmt.Sprintf("[%T content, not shown]", c))
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	return capText(strings.Join(parts, "\n"), max)
}

// capText cuts s to at most max bytes on a rune boundary, saying so.
func capText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	note := fmt.Sprintf("\n[truncated: %d of %d bytes shown]", 0, len(s))
	cut := max - len(note) - 4
	if cut < 0 {
		cut = 0
	}
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n[truncated: %d of %d bytes shown]", cut, len(s))
}
