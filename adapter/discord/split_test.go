package discord

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestSplitMessageGolden(t *testing.T) {
	para := strings.Repeat("word ", 150) // 750 chars
	code := "```go\n" + strings.Repeat("fmt.Println(\"x\")\n", 60) + "```\n"
	tests := []struct{ name, text string }{
		{"short", "hello"},
		{"exact-limit", strings.Repeat("a", 2000)},
		{"paragraphs", para + "\n\n" + para + "\n\n" + para + "\n\n" + para},
		{"code-fence", para + "\n" + code + para + "\n" + code},
		{"no-spaces", strings.Repeat("x", 4500)},
		{"multibyte", strings.Repeat("🤖é ", 1500)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			parts := SplitMessage(tc.text, MaxMessageLen)
			if strings.Join(parts, "") != tc.text {
				t.Fatal("parts do not add up to the text")
			}
			var b strings.Builder
			for i, p := range parts {
				if n := utf8.RuneCountInString(p); n > MaxMessageLen || n == 0 {
					t.Fatalf("part %d has %d characters", i, n)
				}
				b.WriteString("--- part ")
				b.WriteString(string(rune('1' + i)))
				b.WriteString(" ---\n")
				b.WriteString(summarise(p))
				b.WriteString("\n")
			}
			golden := filepath.Join("testdata", "split-"+tc.name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -run TestSplitMessageGolden -update)", err)
			}
			if b.String() != string(want) {
				t.Fatalf("split changed:\n%s\nwant:\n%s", b.String(), want)
			}
		})
	}
}

// summarise keeps golden files readable: length plus the first and last 30 characters.
func summarise(p string) string {
	r := []rune(p)
	head, tail := r, r
	if len(r) > 30 {
		head, tail = r[:30], r[len(r)-30:]
	}
	return strings.NewReplacer("\n", `\n`).Replace(
		"len=" + itoa(len(r)) + " head=" + string(head) + " tail=" + string(tail))
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for n > 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}
