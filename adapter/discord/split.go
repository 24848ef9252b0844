package discord

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// MaxMessageLen is Discord's content limit in characters.
const MaxMessageLen = 2000

// SplitMessage cuts text into parts of at most limit characters whose
// concatenation is exactly text (no markers, nothing dropped or added).
// It cuts, in order of preference, before a code fence line, after a blank
// line, after a newline, after a space, and only then mid-word.
func SplitMessage(text string, limit int) []string {
	if limit <= 0 {
		limit = MaxMessageLen
	}
	var parts []string
	// Runes are counted once, not per part: a long text was quadratic
	// (found by FuzzSplitMessage: 120 KB at a small limit took seconds).
	for n := utf8.RuneCountInString(text); n > limit; {
		cut := cutPoint(text, limit)
		parts = append(parts, text[:cut])
		n -= utf8.RuneCountInString(text[:cut])
		text = text[cut:]
	}
	if text != "" || len(parts) == 0 {
		parts = append(parts, text)
	}
	return parts
}

// cutPoint returns a byte offset in text, at most limit runes in, where the
// first part should end. Cuts outside a code block are preferred.
func cutPoint(text string, limit int) int {
	max := byteOffset(text, limit)
	window := text[:max]
	// Never leave a tiny first part: a boundary in the first half is not worth it.
	min := len(window) / 2
	// Fence positions, found once per window: counting them for every
	// candidate cut was quadratic in the window for a long code block.
	var fences []int // end offsets of the "```" occurrences, left to right
	for i := 0; ; {
		j := strings.Index(window[i:], "```")
		if j < 0 {
			break
		}
		i += j + 3
		fences = append(fences, i)
	}
	// outside reports whether a cut at i is outside a code block: an even
	// number of fences ends at or before i (as strings.Count(window[:i])).
	outside := func(i int) bool {
		n, _ := slices.BinarySearch(fences, i+1)
		return n%2 == 0
	}
	for _, requireOutside := range []bool{true, false} {
		for _, sep := range []string{"\n```", "\n\n", "\n", " "} {
			end := len(window)
			for {
				i := strings.LastIndex(window[:end], sep)
				if i < min {
					break
				}
				cut := i + len(sep)
				if sep == "\n```" {
					cut = i + 1 // the fence starts the next part
				}
				if !requireOutside || outside(cut) {
					return cut
				}
				end = i
			}
		}
	}
	return max
}

// byteOffset is the byte index after the first n runes of s.
func byteOffset(s string, n int) int {
	i := 0
	for j := range s {
		if i == n {
			return j
		}
		i++
	}
	return len(s)
}
