package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Times of states and records are stored as integers, microseconds since
// the Unix epoch (NULL for an absent optional time): the driver then hands
// back an int64 instead of text that it parses by trying layouts in turn,
// which made up most of reading 100,000 states at start-up. The read path
// is plain SQL, like the write path, with the column lists of write.go.

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

// scanner is what LoadStates and GetState read from: *sql.Rows or *sql.Row.
type scanner interface{ Scan(dest ...any) error }

// scanState reads one row of stateColumns.
func scanState(r scanner) (SourceState, error) {
	var st SourceState
	var next, last, success, until sql.NullInt64
	var updated int64
	err := r.Scan(&st.Name, &st.Fingerprint, &st.ConsecutiveFailures, &st.ConsecutiveThrottles,
		&next, &last, &success, &st.LastError, &st.LastOutcome, &st.BreakerState, &until,
		&st.ErrorReason, &st.Paused, &st.PausedReason, &st.PollsTotal, &st.FailuresTotal,
		&st.ThrottledTotal, &st.HistorySeq, &updated)
	if err != nil {
		return SourceState{}, err
	}
	st.NextRunAt, st.LastRunAt = fromNullMicros(next), fromNullMicros(last)
	st.LastSuccessAt, st.BreakerUntil = fromNullMicros(success), fromNullMicros(until)
	st.UpdatedAt = fromMicros(updated)
	return st, nil
}

// LoadStates returns the stored state of every source, in the order of the
// table (by NameHash). The daemon calls it at start-up to resume where it
// stopped.
func (s *Store) LoadStates(ctx context.Context) ([]SourceState, error) {
	rows, err := s.sql.QueryContext(ctx, "SELECT "+stateColumns+" FROM "+tableStates)
	if err != nil {
		return nil, fmt.Errorf("store: load states: %w", err)
	}
	defer rows.Close()
	out := make([]SourceState, 0)
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
func (s *Store) GetState(ctx context.Context, name string) (SourceState, bool, error) {
	row := s.sql.QueryRowContext(ctx, "SELECT "+stateColumns+" FROM "+tableStates+
		" WHERE skey = "+s.bind(1)+" AND name = "+s.bind(2), skey(name), name)
	st, err := scanState(row)
	switch {
	case err == sql.ErrNoRows:
		return SourceState{}, false, nil
	case err != nil:
		return SourceState{}, false, fmt.Errorf("store: get state %q: %w", name, err)
	}
	return st, true, nil
}

// History returns up to n poll records of a source, newest (largest Seq)
// first. n <= 0 returns none.
func (s *Store) History(ctx context.Context, name string, n int) ([]PollRecord, error) {
	out := make([]PollRecord, 0)
	if n <= 0 {
		return out, nil
	}
	fail := func(err error) ([]PollRecord, error) {
		return nil, fmt.Errorf("store: history of %q: %w", name, err)
	}
	key := skey(name)
	where := " WHERE skey = " + s.bind(1) + " AND source = " + s.bind(2)
	var tail []byte
	var keepFrom int64
	err := s.sql.QueryRowContext(ctx, "SELECT data, keep_from FROM "+tableTail+where, key, name).Scan(&tail, &keepFrom)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return out, nil
	case err != nil:
		return fail(err)
	}
	// Newest first: the tail, then the blocks from the newest. A Seq seen
	// again further on is an older copy (a record saved again replaces it).
	seen := map[int64]bool{}
	add := func(blob []byte) error {
		recs, err := decodeBlob(name, blob)
		if err != nil {
			return err
		}
		for i := len(recs) - 1; i >= 0; i-- {
			if r := recs[i]; r.Seq >= keepFrom && !seen[r.Seq] {
				seen[r.Seq] = true
				out = append(out, r)
			}
		}
		return nil
	}
	if err := add(tail); err != nil {
		return fail(err)
	}
	rows, err := s.sql.QueryContext(ctx, "SELECT last_seq, data FROM "+tableBlocks+where+" AND last_seq >= "+s.bind(3)+
		" ORDER BY last_seq DESC", key, name, keepFrom)
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
		above := 0
		for i := range out {
			if out[i].Seq > last {
				above++
			}
		}
		if above >= n {
			break
		}
		if err := add(blob); err != nil {
			return fail(err)
		}
	}
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	slices.SortStableFunc(out, func(a, b PollRecord) int { return cmp.Compare(b.Seq, a.Seq) })
	return out[:min(n, len(out))], nil
}
