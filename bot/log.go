package bot

import (
	"io"

	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/internal/redact"
	"github.com/rs/zerolog"
)

// NewLogger builds the process logger. Every line passes through red (the
// configured secrets plus the credential shapes of internal/redact) before
// it reaches w, whatever the error path that logged it (invariant 14).
func NewLogger(cfg config.LogConfig, w io.Writer, red *redact.Redactor) zerolog.Logger {
	lvl, err := zerolog.ParseLevel(cfg.Level)
	if err != nil {
		lvl = zerolog.InfoLevel
	}
	w = red.Writer(w)
	out := w
	if cfg.Format != "json" {
		out = zerolog.ConsoleWriter{Out: w, TimeFormat: "15:04:05"}
	}
	return zerolog.New(out).Level(lvl).With().Timestamp().Logger()
}
