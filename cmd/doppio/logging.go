package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/pflag"
)

// logFlags are --log-format and --log-level of the server commands
// (start, router, dev), which log to stderr.
type logFlags struct {
	format, level string
}

func (l *logFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&l.format, "log-format", "text", "log line format on stderr: text (key=value) or json (one object per line)")
	fl.StringVar(&l.level, "log-level", "info", "least severe level logged: debug, info, warn or error")
}

// logger is the logger the flags describe, or an error naming the flag
// whose value is not one of its choices.
func (l *logFlags) logger() (*slog.Logger, error) {
	var level slog.Level
	switch l.level {
	case "debug":
		level = slog.LevelDebug
	case "info":
		level = slog.LevelInfo
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	default:
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", l.level)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch l.format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", l.format)
}
