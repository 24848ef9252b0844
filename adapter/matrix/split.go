package matrix

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxEventBytes is Matrix's limit on a whole event as JSON (the PDU: content plus envelope, signatures, hashes,
// auth and prev events).
const MaxEventBytes = 65536

// MaxContentBytes is the most this package puts in an event's content JSON. The rest of MaxEventBytes (5.5 KiB) is
// left to the envelope the homeserver adds: room id and sender (at most 255 bytes each), up to 20 prev_events and
// the auth events (about 50 bytes each), hashes, signatures, depth, type, timestamps.
const MaxContentBytes = 60000

// Defuse makes text safe to post: every "@room" gets a word joiner (U+2060) after its "@", so no homeserver's
// legacy @room push rule matches (Dendrite applies it even to events with empty m.mentions). It shows the same.
func Defuse(text string) string {
	return strings.ReplaceAll(text, "@room", "@\u2060room")
}

// jsonLen is how many bytes r takes inside a JSON string as encoding/json writes it (HTML-safe escaping).
func jsonLen(r rune, size int) int {
	switch {
	case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t' || r == '\b' || r == '\f':
		return 2
	case r < 0x20 || r == '<' || r == '>' || r == '&' || r == '\u2028' || r == '\u2029':
		return 6
	case r == utf8.RuneError && size == 1:
		return 6 // invalid UTF-8 becomes \ufffd
	}
	return size
}

// JSONLen is the length of s as the inside of a JSON string (without the quotes).
func JSONLen(s string) int {
	n := 0
	for i, r := range s {
		_, size := utf8.DecodeRuneInString(s[i:])
		n += jsonLen(r, size)
	}
	return n
}

// Split cuts text into parts whose JSON-escaped length is at most budget bytes each, cutting at the cleanest point
// in the second half of each window: after a blank line, else after a line break, else after white space, else
// at a character boundary. The parts add up to text. Text that fits is one part; empty text is no part.
func Split(text string, budget int) []string {
	if budget < 8 {
		budget = 8 // room for one escaped character
	}
	var parts []string
	for text != "" {
		// end: the longest prefix that fits.
		n, end := 0, len(text)
		for i, r := range text {
			_, size := utf8.DecodeRuneInString(text[i:])
			if n+jsonLen(r, size) > budget {
				end = i
				break
			}
			n += jsonLen(r, size)
		}
		if end == len(text) {
			parts = append(parts, text)
			break
		}
		parts = append(parts, text[:cleanCut(text[:end])])
		text = text[len(parts[len(parts)-1]):]
	}
	return parts
}

// cleanCut returns where to end a part within window (its length if no better cut in its second half).
func cleanCut(window string) int {
	half := len(window) / 2
	if i := strings.LastIndex(window, "\n\n"); i >= half {
		return i + 2
	}
	if i := strings.LastIndexByte(window, '\n'); i >= half {
		return i + 1
	}
	if i := strings.LastIndexFunc(window, unicode.IsSpace); i >= half {
		_, size := utf8.DecodeRuneInString(window[i:])
		return i + size
	}
	if len(window) == 0 {
		return 0
	}
	return len(window)
}
