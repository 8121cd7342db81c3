package sqlcore

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pacer-dev/pacer/domain"
)

// The outbox of notifications (contract 10.2): an event is inserted in the
// transaction that commits the state change causing it (Commit), and stays
// until a sender delivered it (EventSent) or it is too old (DropEvents).
// Senders claim events with one conditional UPDATE (ClaimEvents): only the
// oldest event of each source is claimable, and only while nobody's claim
// on it holds, so that events of one source go out in order and, in a
// cluster, each is delivered by one member at a time.

const tableEvents = "events"

// eventColumns lists the columns an insert writes (seq is the database's).
const eventColumns = "id, source, event, state, previous_state, reason, consecutive_failures, at, attempts, " +
	"next_attempt_at, claimed_by, claim_until, reminder"

// eventModel is a row of events. Times are microseconds since the epoch; a
// zero next_attempt_at or claim_until means none.
type eventModel struct {
	Seq                 int64  `gorm:"column:seq;primaryKey;autoIncrement;index:idx_events_source_seq,priority:2"`
	EventID             string `gorm:"column:id;size:64;not null;uniqueIndex:idx_events_id"`
	Source              string `gorm:"not null;index:idx_events_source_seq,priority:1"`
	Event               string `gorm:"not null"`
	State               string `gorm:"not null;default:('')"`
	PreviousState       string `gorm:"not null;default:('')"`
	Reason              string `gorm:"not null;default:('')"`
	ConsecutiveFailures int64  `gorm:"not null;default:0"`
	At                  int64  `gorm:"not null;index:idx_events_at"`
	Attempts            int64  `gorm:"not null;default:0"`
	NextAttemptAt       int64  `gorm:"not null;default:0"`
	ClaimedBy           string `gorm:"not null;default:('')"`
	ClaimUntil          int64  `gorm:"not null;default:0"`
	// Reminder (domain.Event.Reminder): an additive column, NULL (not a
	// reminder) in the rows written before it.
	Reminder *bool
}

// TableName pins the table of eventModel.
func (eventModel) TableName() string { return tableEvents }

// prepareEvents checks the events of a batch and gives each an id.
func prepareEvents(in []domain.Event) ([]domain.Event, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]domain.Event, len(in))
	for i, ev := range in {
		if ev.Key() == "" || ev.Event == "" {
			return nil, fmt.Errorf("event #%d has no source or no event name", i)
		}
		if ev.ID == "" {
			ev.ID = domain.NewEventID()
		}
		out[i] = ev
	}
	return out, nil
}

// insertEvents writes events within tx, in the SQL of d.
func insertEvents(ctx context.Context, tx *sql.Tx, d Dialect, events []domain.Event) error {
	if len(events) == 0 {
		return nil
	}
	q := insertSQL(tableEvents, eventColumns, 1, d.Bind)
	for i := range events {
		ev := &events[i]
		// A host event is kept in the columns of a source's: its key in
		// source (which orders the outbox), its number of sources in
		// consecutive_failures (scanEvent reads them back).
		count := ev.ConsecutiveFailures
		if ev.Host != "" {
			count = ev.Sources
		}
		if _, err := tx.ExecContext(ctx, q, ev.ID, ev.Key(), ev.Event, ev.State, ev.PreviousState, ev.Reason,
			count, micros(ev.At), ev.Attempts, zeroMicros(ev.NextAttemptAt), ev.ClaimedBy,
			zeroMicros(ev.ClaimUntil), ev.Reminder); err != nil {
			return fmt.Errorf("insert event of %q: %w", ev.Source, err)
		}
	}
	return nil
}

// zeroMicros is micros(t), 0 for the zero time.
func zeroMicros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return micros(t)
}

// fromZeroMicros is fromMicros, the zero time for 0.
func fromZeroMicros(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return fromMicros(us)
}

// eventSelect is the columns ClaimEvents returns, in the order it scans them.
const eventSelect = "seq, " + eventColumns

// ClaimEvents claims, in one conditional UPDATE, up to c.Limit events: for
// each source only its oldest event, when it is due (next_attempt_at) and
// nobody's claim on it holds at c.Now. On PostgreSQL the rows another
// claimer is taking are skipped (FOR UPDATE SKIP LOCKED). The events are
// returned oldest first.
func (s *Core) ClaimEvents(ctx context.Context, c domain.EventClaim) ([]domain.Event, error) {
	if c.Limit <= 0 {
		return nil, nil
	}
	if err := checkGuard(s.Guard); err != nil {
		// The events of a deleted file are not the store's any more.
		return nil, fmt.Errorf("store: claim events: %w", err)
	}
	now, until := micros(c.Now), micros(c.Until)
	lock := s.dia.ClaimLock()
	b := s.dia.Bind
	q := "UPDATE " + tableEvents + " SET claimed_by = " + b(1) + ", claim_until = " + b(2) +
		" WHERE seq IN (SELECT e.seq FROM " + tableEvents + " e WHERE e.seq = (SELECT min(x.seq) FROM " + tableEvents +
		" x WHERE x.source = e.source) AND e.claim_until < " + b(3) + " AND e.next_attempt_at <= " + b(4) +
		" ORDER BY e.seq LIMIT " + b(5) + lock + ") AND claim_until < " + b(6) + " RETURNING " + eventSelect
	rows, err := s.SQL.QueryContext(ctx, q, c.Member, until, now, now, c.Limit, now)
	if err != nil {
		return nil, fmt.Errorf("store: claim events: %w", err)
	}
	defer rows.Close()
	var out []domain.Event
	for rows.Next() {
		var ev domain.Event
		var at, next, claim int64
		var reminder sql.NullBool
		if err := rows.Scan(&ev.Seq, &ev.ID, &ev.Source, &ev.Event, &ev.State, &ev.PreviousState, &ev.Reason,
			&ev.ConsecutiveFailures, &at, &ev.Attempts, &next, &ev.ClaimedBy, &claim, &reminder); err != nil {
			return nil, fmt.Errorf("store: claim events: %w", err)
		}
		ev.At, ev.NextAttemptAt, ev.ClaimUntil = fromMicros(at), fromZeroMicros(next), fromZeroMicros(claim)
		ev.Reminder = reminder.Bool
		hostEvent(&ev)
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: claim events: %w", err)
	}
	sortEvents(out)
	return out, nil
}

// hostEvent turns an event read whose source is a host event's key
// (domain.Event.Key) back into a host event.
func hostEvent(ev *domain.Event) {
	if h, ok := strings.CutPrefix(ev.Source, domain.HostEventPrefix); ok {
		ev.Host, ev.Source = h, ""
		ev.Sources, ev.ConsecutiveFailures = ev.ConsecutiveFailures, 0
	}
}

// sortEvents orders events by Seq (RETURNING gives no order).
func sortEvents(evs []domain.Event) {
	slices.SortFunc(evs, func(a, b domain.Event) int { return cmp.Compare(a.Seq, b.Seq) })
}

// EventSent removes a delivered event from the outbox. An event already
// gone (dropped meanwhile) is not an error.
func (s *Core) EventSent(ctx context.Context, id string) error {
	if _, err := s.SQL.ExecContext(ctx, "DELETE FROM "+tableEvents+" WHERE id = "+s.dia.Bind(1), id); err != nil {
		return fmt.Errorf("store: event %s sent: %w", id, err)
	}
	return nil
}

// EventFailed records a failed delivery: one more attempt, claimable again
// from next on, its claim given back.
func (s *Core) EventFailed(ctx context.Context, id string, next time.Time) error {
	b := s.dia.Bind
	if _, err := s.SQL.ExecContext(ctx, "UPDATE "+tableEvents+" SET attempts = attempts + 1, next_attempt_at = "+b(1)+
		", claimed_by = '', claim_until = 0 WHERE id = "+b(2), micros(next), id); err != nil {
		return fmt.Errorf("store: event %s failed: %w", id, err)
	}
	return nil
}

// RetryEventsNow makes the undelivered events due at now: a retry backoff
// that runs past now is cut short (the target answered again, so the others
// need not wait out minutes of it), and with releaseClaims every claim is
// given back (a daemon alone on its store calls it at start: a claim left
// then is a killed daemon's, and would hold its event for the claim's
// length). It returns how many events it changed.
func (s *Core) RetryEventsNow(ctx context.Context, now time.Time, releaseClaims bool) (int64, error) {
	b := s.dia.Bind
	q := "UPDATE " + tableEvents + " SET next_attempt_at = " + b(1) + " WHERE next_attempt_at > " + b(2)
	args := []any{micros(now), micros(now)}
	if releaseClaims {
		q = "UPDATE " + tableEvents + " SET next_attempt_at = CASE WHEN next_attempt_at > " + b(1) + " THEN " + b(2) +
			" ELSE next_attempt_at END, claimed_by = '', claim_until = 0 WHERE next_attempt_at > " + b(3) + " OR claim_until > 0"
		args = []any{micros(now), micros(now), micros(now)}
	}
	res, err := s.SQL.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, fmt.Errorf("store: retry events now: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("store: retry events now: %w", err)
	}
	return n, nil
}

// DropEvents deletes the events made before before whose claim does not
// hold at now, and returns them (for the sender's log line and count).
func (s *Core) DropEvents(ctx context.Context, before, now time.Time) ([]domain.Event, error) {
	b := s.dia.Bind
	rows, err := s.SQL.QueryContext(ctx, "DELETE FROM "+tableEvents+" WHERE at < "+b(1)+" AND claim_until < "+b(2)+
		" RETURNING seq, id, source, event, attempts", micros(before), micros(now))
	if err != nil {
		return nil, fmt.Errorf("store: drop events: %w", err)
	}
	defer rows.Close()
	out, err := scanDeleted(rows)
	if err != nil {
		return nil, fmt.Errorf("store: drop events: %w", err)
	}
	return out, nil
}

// TrimEvents bounds the outbox by count: of each source's events it keeps
// the newest keep and deletes the older ones, except one whose claim holds
// at now (in delivery: deleting it would let the source's next event go
// before it ends). It returns the deleted events, oldest first (for the
// sender's log line and count). What is kept stays in order.
func (s *Core) TrimEvents(ctx context.Context, keep int, now time.Time) ([]domain.Event, error) {
	if keep < 0 {
		return nil, fmt.Errorf("store: trim events: keep %d < 0", keep)
	}
	b := s.dia.Bind
	// ROW_NUMBER counts every event, the claimed one included: a source
	// keeps at most keep events, plus the one in delivery when it is older.
	rows, err := s.SQL.QueryContext(ctx, "DELETE FROM "+tableEvents+" WHERE seq IN (SELECT r.seq FROM (SELECT seq, claim_until, "+
		"ROW_NUMBER() OVER (PARTITION BY source ORDER BY seq DESC) AS rn FROM "+tableEvents+") r WHERE r.rn > "+b(1)+
		" AND r.claim_until < "+b(2)+") AND claim_until < "+b(3)+" RETURNING seq, id, source, event, attempts",
		keep, micros(now), micros(now))
	if err != nil {
		return nil, fmt.Errorf("store: trim events: %w", err)
	}
	defer rows.Close()
	out, err := scanDeleted(rows)
	if err != nil {
		return nil, fmt.Errorf("store: trim events: %w", err)
	}
	return out, nil
}

// scanDeleted reads the rows of a DELETE ... RETURNING seq, id, source,
// event, attempts, ordered by seq.
func scanDeleted(rows *sql.Rows) ([]domain.Event, error) {
	var out []domain.Event
	for rows.Next() {
		var ev domain.Event
		if err := rows.Scan(&ev.Seq, &ev.ID, &ev.Source, &ev.Event, &ev.Attempts); err != nil {
			return nil, err
		}
		hostEvent(&ev)
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	sortEvents(out)
	return out, nil
}

// PendingEvents counts the events in the outbox.
func (s *Core) PendingEvents(ctx context.Context) (int, error) {
	var n int
	if err := s.SQL.QueryRowContext(ctx, "SELECT count(*) FROM "+tableEvents).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: pending events: %w", err)
	}
	return n, nil
}

// Commit writes b in one transaction: its states and records as SaveBatch
// does, and its events into the outbox. Either all of it is committed or
// none of it.
func (s *Core) Commit(ctx context.Context, b domain.Batch, keep int) error {
	if b.Empty() {
		return nil
	}
	if err := checkGuard(s.Guard); err != nil {
		return fmt.Errorf("store: save batch: %w", err)
	}
	return s.CommitChecked(ctx, b, keep, nil)
}

// CommitChecked writes b as Commit does, after check, run first in its
// transaction, took out the rows that may not be written (nil: every row
// is written). The fenced commit of a cluster's member is one.
func (s *Core) CommitChecked(ctx context.Context, b domain.Batch, keep int, check Check) error {
	rows, err := prepareBatch(b)
	if err != nil {
		return fmt.Errorf("store: save batch: %w", err)
	}
	if err := s.commitBatchChecked(ctx, rows, keep, check); err != nil {
		return fmt.Errorf("store: save batch: %w", err)
	}
	return nil
}

// prepareBatch checks b and brings it to the rows commitBatchChecked
// writes.
func prepareBatch(b domain.Batch) (*BatchRows, error) {
	sts, err := prepareStates(b.States, Now())
	if err != nil {
		return nil, err
	}
	for i := range b.Records {
		if b.Records[i].Source == "" {
			return nil, fmt.Errorf("record #%d has no source", i)
		}
	}
	evs, err := prepareEvents(b.Events)
	if err != nil {
		return nil, err
	}
	return &BatchRows{sts: sts, records: b.Records, events: evs}, nil
}

// BatchRows is what one transaction of commitBatchChecked writes: a
// batch checked and brought to its rows.
type BatchRows struct {
	sts     []stateRow
	records []domain.PollRecord
	events  []domain.Event
}

// EachSource calls f with the source of each state and record of r.
func (r *BatchRows) EachSource(f func(source string)) {
	for i := range r.sts {
		f(r.sts[i].st.Name)
	}
	for i := range r.records {
		f(r.records[i].Source)
	}
}

// Keep removes from r the states, records and events of the sources keep
// refuses (the batch's slices are not modified).
func (r *BatchRows) Keep(keep func(source string) bool) {
	r.sts = slices.DeleteFunc(r.sts, func(r stateRow) bool { return !keep(r.st.Name) })
	r.records = slices.DeleteFunc(slices.Clone(r.records), func(r domain.PollRecord) bool { return !keep(r.Source) })
	r.events = slices.DeleteFunc(slices.Clone(r.events), func(ev domain.Event) bool { return !keep(ev.Source) })
}
