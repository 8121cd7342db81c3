package sqlcore

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"gorm.io/gorm/logger"
)

// slowQuery is the duration from which a statement is logged as slow.
const slowQuery = time.Second

// gormLogger routes gorm's own messages to slog at warn and above. Failed
// statements are not logged here: the store returns them as errors and the
// caller decides. Bind values are never logged (they may carry error texts
// and reasons); only the SQL text is.
type gormLogger struct {
	log *slog.Logger
}

func NewGormLogger(log *slog.Logger) gormLogger { return gormLogger{log: log} }

// LogMode is ignored: the level is the slog logger's business.
func (l gormLogger) LogMode(logger.LogLevel) logger.Interface { return l }

// Info drops gorm's informational messages.
func (l gormLogger) Info(context.Context, string, ...any) {}

// Warn logs a gorm warning.
func (l gormLogger) Warn(ctx context.Context, msg string, data ...any) {
	l.log.WarnContext(ctx, "store: "+fmt.Sprintf(msg, data...))
}

// Error logs a gorm error that is not a statement's result.
func (l gormLogger) Error(ctx context.Context, msg string, data ...any) {
	l.log.ErrorContext(ctx, "store: "+fmt.Sprintf(msg, data...))
}

// Trace logs statements slower than slowQuery.
func (l gormLogger) Trace(ctx context.Context, begin time.Time, fc func() (string, int64), _ error) {
	elapsed := time.Since(begin)
	if elapsed < slowQuery {
		return
	}
	sql, rows := fc()
	l.log.WarnContext(ctx, "store: slow query", "duration", elapsed, "sql", sql, "rows", rows)
}

// ParamsFilter keeps bind values out of the SQL text given to Trace.
func (l gormLogger) ParamsFilter(_ context.Context, sql string, _ ...any) (string, []any) {
	return sql, nil
}
