package sqlcore

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"

	"github.com/pacer-dev/pacer/domain"
)

// Times of states and records are stored as integers, microseconds since
// the Unix epoch (NULL for an absent optional time): the driver then hands
// back an int64 instead of text that it parses by trying layouts in turn,
// which made up most of reading 100,000 states at start-up. LoadStates is
// plain SQL, like the write path, with the column lists of write.go; the
// other reads go through gorm and the models (models.go).

// micros is the stored form of t; the zero time is 0.
func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

// microsPtr is micros for optional times: nil is NULL.
func microsPtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMicro()
}

// fromMicros reads a stored time back, in UTC; 0 is the zero time.
func fromMicros(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}

// fromNullMicros reads an optional stored time back.
func fromNullMicros(us sql.NullInt64) *time.Time {
	if !us.Valid {
		return nil
	}
	t := fromMicros(us.Int64)
	return &t
}

// scanState reads one row of stateColumns.
func scanState(r *sql.Rows) (domain.SourceState, error) {
	var st domain.SourceState
	var next, last, success, until, lastErr, changed, changes, remind sql.NullInt64
	var etag, modified, digest, held sql.NullString
	var incident sql.NullBool
	var updated int64
	err := r.Scan(&st.Name, &st.Fingerprint, &st.ConsecutiveFailures, &st.ConsecutiveThrottles,
		&next, &last, &success, &st.LastError, &st.LastOutcome, &st.BreakerState, &until,
		&st.ErrorReason, &st.Paused, &st.PausedReason, &st.PollsTotal, &st.FailuresTotal,
		&st.ThrottledTotal, &st.HistorySeq, &updated, &lastErr,
		&etag, &modified, &digest, &changed, &changes, &incident, &remind, &held)
	if err != nil {
		return domain.SourceState{}, err
	}
	st.NextRunAt, st.LastRunAt = fromNullMicros(next), fromNullMicros(last)
	st.LastSuccessAt, st.BreakerUntil = fromNullMicros(success), fromNullMicros(until)
	st.UpdatedAt, st.LastErrorAt = fromMicros(updated), fromNullMicros(lastErr)
	st.ETag, st.LastModified, st.Digest = etag.String, modified.String, digest.String
	st.LastChangedAt, st.ChangesTotal = fromNullMicros(changed), changes.Int64
	st.IncidentOpen = incident.Bool
	st.RemindAt, st.HeldEvent = fromNullMicros(remind), held.String
	return st, nil
}

// LoadStates returns the stored state of every source, in the order of the
// table (by NameHash). The daemon calls it at start-up to resume where it
// stopped.
//
// Raw SQL, scanned into SourceState directly: the start-up read of 100,000
// states (BenchmarkLoadStates, and bench's BenchmarkStartup).
func (s *Core) LoadStates(ctx context.Context) ([]domain.SourceState, error) {
	return s.QueryStates(ctx, s.dia.StatesOrder())
}

// QueryStates returns the states of the rows of source_states that rest
// selects (a WHERE and ORDER BY clause, with its args), through the raw
// SQL of LoadStates.
func (s *Core) QueryStates(ctx context.Context, rest string, args ...any) ([]domain.SourceState, error) {
	rows, err := s.SQL.QueryContext(ctx, "SELECT "+stateColumns+" FROM "+tableStates+" "+rest, args...)
	if err != nil {
		return nil, fmt.Errorf("store: load states: %w", err)
	}
	return scanStates(rows, make([]domain.SourceState, 0))
}

// scanStates appends the states of rows (a query of stateColumns) to out
// and closes rows.
func scanStates(rows *sql.Rows, out []domain.SourceState) ([]domain.SourceState, error) {
	defer rows.Close()
	for rows.Next() {
		st, err := scanState(rows)
		if err != nil {
			return nil, fmt.Errorf("store: load states: %w", err)
		}
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: load states: %w", err)
	}
	return out, nil
}

// GetState returns the stored state of one source; ok is false when the
// source has none (it was never saved).
func (s *Core) GetState(ctx context.Context, name string) (domain.SourceState, bool, error) {
	var rows []stateModel
	err := s.DB.WithContext(ctx).Where("skey = ? AND name = ?", Skey(name), name).Limit(1).Find(&rows).Error
	switch {
	case err != nil:
		return domain.SourceState{}, false, fmt.Errorf("store: get state %q: %w", name, err)
	case len(rows) == 0:
		return domain.SourceState{}, false, nil
	}
	return rows[0].state(), true, nil
}

// History returns up to n poll records of a source, newest (largest Seq)
// first. n <= 0 returns none.
func (s *Core) History(ctx context.Context, name string, n int) ([]domain.PollRecord, error) {
	return history(s.DB.WithContext(ctx), name, n)
}

// Histories returns History(name, n) of each of names, read over one
// connection. The status page shows the last polls of 50 sources a page:
// read one by one, each read waited for SQLite's only connection behind
// the flusher's commits, 50 waits a page while the sources polled.
func (s *Core) Histories(ctx context.Context, names []string, n int) (map[string][]domain.PollRecord, error) {
	out := make(map[string][]domain.PollRecord, len(names))
	var readErr error // a read's error, which names its source
	err := s.DB.WithContext(ctx).Connection(func(conn *gorm.DB) error {
		// A session: each read builds its own statement on the connection
		// (conn's would gather the conditions of every read).
		tx := conn.Session(&gorm.Session{})
		for _, name := range names {
			out[name], readErr = history(tx, name, n)
			if readErr != nil {
				return readErr
			}
		}
		return nil
	})
	switch {
	case readErr != nil:
		return nil, readErr
	case err != nil:
		return nil, fmt.Errorf("store: histories: %w", err)
	}
	return out, nil
}

// history is History on db (a pool or one connection).
func history(db *gorm.DB, name string, n int) ([]domain.PollRecord, error) {
	out := make([]domain.PollRecord, 0)
	if n <= 0 {
		return out, nil
	}
	fail := func(err error) ([]domain.PollRecord, error) {
		return nil, fmt.Errorf("store: history of %q: %w", name, err)
	}
	key := Skey(name)
	var tails []tailModel
	if err := db.Select("data", "keep_from").Where("skey = ? AND source = ?", key, name).Limit(1).Find(&tails).Error; err != nil {
		return fail(err)
	}
	if len(tails) == 0 {
		return out, nil
	}
	// Newest first: the tail, then the blocks from the newest.
	c := collector{name: name, keepFrom: tails[0].KeepFrom, seen: map[int64]bool{}, out: out}
	if err := c.add(tails[0].Data); err != nil {
		return fail(err)
	}
	rows, err := db.Model(&blockModel{}).Select("last_seq", "data").
		Where("skey = ? AND source = ? AND last_seq >= ?", key, name, c.keepFrom).Order("last_seq DESC").Rows()
	if err != nil {
		return fail(err)
	}
	defer rows.Close()
	for rows.Next() {
		var last int64
		var blob []byte
		if err := rows.Scan(&last, &blob); err != nil {
			return fail(err)
		}
		// This block and the older ones hold no Seq above last: once n
		// records above it are collected, none of them can be among the
		// newest n.
		if c.above(last) >= n {
			break
		}
		if err := c.add(blob); err != nil {
			return fail(err)
		}
	}
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	out = c.out
	slices.SortStableFunc(out, func(a, b domain.PollRecord) int { return cmp.Compare(b.Seq, a.Seq) })
	return out[:min(n, len(out))], nil
}

// collector gathers a source's records read newest blob first: a Seq seen
// again further on is an older copy (a record saved again replaces it),
// and one below keepFrom is trimmed.
type collector struct {
	name     string
	keepFrom int64
	seen     map[int64]bool
	out      []domain.PollRecord
}

// add collects the records of blob, newest first.
func (c *collector) add(blob []byte) error {
	recs, err := decodeBlob(c.name, blob)
	if err != nil {
		return err
	}
	for i := len(recs) - 1; i >= 0; i-- {
		if r := recs[i]; r.Seq >= c.keepFrom && !c.seen[r.Seq] {
			c.seen[r.Seq] = true
			c.out = append(c.out, r)
		}
	}
	return nil
}

// above counts the records collected whose Seq is above seq.
func (c *collector) above(seq int64) int {
	n := 0
	for i := range c.out {
		if c.out[i].Seq > seq {
			n++
		}
	}
	return n
}
