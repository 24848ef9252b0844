package discord

import (
	"strings"
	"testing"
)

func BenchmarkSplitBigCode(b *testing.B) {
	text := "```go\n" + strings.Repeat("x := 1\n", 150000) + "```\n"
	for i := 0; i < b.N; i++ {
		SplitMessage(text, MaxMessageLen)
	}
}

func BenchmarkSplitSmallLimit(b *testing.B) {
	text := strings.Repeat("ab cd\n", 20000)
	for i := 0; i < b.N; i++ {
		SplitMessage(text, 3)
	}
}
