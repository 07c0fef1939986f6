package embedetcd

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"

	"go.uber.org/zap/zapcore"
)

// slogCore is a zapcore.Core that hands etcd's zap records to slog, so etcd
// logs where the rest of Doppio logs, and only at min level and above (etcd
// is chatty at info).
type slogCore struct {
	logger *slog.Logger
	min    zapcore.Level
	attrs  []slog.Attr
	// closing is set once Close begins: etcd then reports every listener it
	// shuts down as an error, which is expected, so those become debug.
	closing *atomic.Bool
}

// benign are warnings etcd prints on every start of a dev member that say
// nothing actionable: we deliberately serve gRPC and HTTP on one loopback
// port, and etcd auth (simple tokens) is not used.
var benign = map[string]bool{
	"Running http and grpc server on single port. This is not recommended for production.": true,
	"simple token is not cryptographically signed":                                         true,
}

func newSlogCore(logger *slog.Logger, min zapcore.Level, closing *atomic.Bool) zapcore.Core {
	return &slogCore{logger: logger, min: min, closing: closing}
}

func (c *slogCore) Enabled(l zapcore.Level) bool { return l >= c.min }

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{logger: c.logger, min: c.min, closing: c.closing, attrs: append(append([]slog.Attr(nil), c.attrs...), fieldAttrs(fields)...)}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) && !benign[e.Message] && !c.closing.Load() {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	attrs := append(append([]slog.Attr(nil), c.attrs...), fieldAttrs(fields)...)
	if e.LoggerName != "" {
		attrs = append(attrs, slog.String("logger", e.LoggerName))
	}
	c.logger.LogAttrs(context.Background(), slogLevel(e.Level), e.Message, attrs...)
	return nil
}

func (c *slogCore) Sync() error { return nil }

func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

// fieldAttrs renders zap fields through zap's own map encoder, which knows
// every field type (errors, durations, arrays, objects).
func fieldAttrs(fields []zapcore.Field) []slog.Attr {
	if len(fields) == 0 {
		return nil
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	attrs := make([]slog.Attr, 0, len(enc.Fields))
	for _, k := range slices.Sorted(maps.Keys(enc.Fields)) {
		attrs = append(attrs, slog.Any(k, enc.Fields[k]))
	}
	return attrs
}
