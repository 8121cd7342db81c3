package store

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/internal/backend"
	"github.com/pacer-dev/pacer/store/internal/sqlcore"
	"github.com/pacer-dev/pacer/store/postgres"
	"github.com/pacer-dev/pacer/store/sqlite"
)

// Backend is a store in domain terms: what the daemon, the CLI, the
// notifier and the cluster need of it. Each dialect implements it
// (sqlite.Store, postgres.Store) on a shared core (internal/sqlcore), and
// both pass the same conformance suite (runStoreSuite in the tests).
type Backend interface {
	States
	Commands
	Outbox
	Cluster
	Hosts
	// Writable checks that the store answers and accepts a write now.
	Writable(ctx context.Context) error
	// Close closes the database.
	Close() error
}

// States is the durable state of the sources and their poll history.
type States interface {
	LoadStates(ctx context.Context) ([]domain.SourceState, error)
	GetState(ctx context.Context, name string) (domain.SourceState, bool, error)
	History(ctx context.Context, name string, n int) ([]domain.PollRecord, error)
	Histories(ctx context.Context, names []string, n int) (map[string][]domain.PollRecord, error)
	SaveBatch(ctx context.Context, states []domain.SourceState, records []domain.PollRecord, keep int) error
	Commit(ctx context.Context, b domain.Batch, keep int) error
}

// Hosts is the stored state of the host groups (contract section 13).
type Hosts interface {
	SaveHosts(ctx context.Context, hs []domain.HostState) error
	LoadHosts(ctx context.Context) ([]domain.HostState, error)
}

// Commands is the queue of the CLI's commands to a running daemon.
type Commands interface {
	EnqueueCommand(ctx context.Context, c *domain.Command) error
	PendingCommands(ctx context.Context) ([]domain.Command, error)
	ClaimCommand(ctx context.Context, id uint64) (bool, error)
	ExpireCommand(ctx context.Context, id uint64, reason string) (bool, error)
	OrphanedCommands(ctx context.Context) ([]domain.Command, error)
	CompleteCommand(ctx context.Context, id uint64, result, code string) error
	GetCommand(ctx context.Context, id uint64) (domain.Command, error)
}

// Outbox is the outbox of notifications (contract 10.2).
type Outbox interface {
	ClaimEvents(ctx context.Context, c domain.EventClaim) ([]domain.Event, error)
	EventSent(ctx context.Context, id string) error
	EventFailed(ctx context.Context, id string, next time.Time) error
	RetryEventsNow(ctx context.Context, now time.Time, releaseClaims bool) (int64, error)
	DropEvents(ctx context.Context, before, now time.Time) ([]domain.Event, error)
	TrimEvents(ctx context.Context, keep int, now time.Time) ([]domain.Event, error)
	PendingEvents(ctx context.Context) (int, error)
}

// Cluster is the store's part of a cluster (contract section 8): members,
// shard claims and fenced commits. Only PostgreSQL has one; SQLite's
// answer to each call is ErrNoCluster.
type Cluster interface {
	Heartbeat(ctx context.Context, m domain.Member, lease time.Duration) ([]domain.Member, error)
	DatabaseNow(ctx context.Context) (time.Time, error)
	Members(ctx context.Context, lease time.Duration) ([]domain.Member, error)
	LeaveCluster(ctx context.Context, member string) error
	ClaimShards(ctx context.Context, member string, lease time.Duration, want, release []int) ([]domain.Claim, error)
	SaveBatchFenced(ctx context.Context, f domain.Fence, states []domain.SourceState, records []domain.PollRecord, keep int) ([]string, error)
	CommitFenced(ctx context.Context, f domain.Fence, b domain.Batch, keep int) ([]string, error)
	ShardOwners(ctx context.Context) (map[int]string, error)
	LoadStatesOf(ctx context.Context, names []string) ([]domain.SourceState, error)
	PublishShardSources(ctx context.Context, member string, counts map[int]int) error
	ShardSources(ctx context.Context, members []string) (map[string]map[int]int, error)
}

var (
	_ Backend = (*sqlite.Store)(nil)
	_ Backend = (*postgres.Store)(nil)
)

// Store is an open store, the handle callers hold: the Backend of its
// dialect. It is safe for concurrent use.
type Store struct {
	Backend
}

// DefaultBusyTimeout is how long a write waits for another connection's
// write transaction (for example a CLI command) before it fails.
const DefaultBusyTimeout = 5 * time.Second

// MaxPendingCommands bounds one PendingCommands answer so that a flood of
// CLI commands cannot stall the daemon's command loop.
const MaxPendingCommands = sqlcore.MaxPendingCommands

// ErrNotFound is returned (wrapped) when a command asked for by id does not
// exist. Test with errors.Is.
var ErrNotFound = sqlcore.ErrNotFound

// ErrNoCluster is returned by the cluster calls on a SQLite store.
var ErrNoCluster = sqlcore.ErrNoCluster

// Options tune Open. The zero value is ready to use.
type Options struct {
	// Logger receives the store's own warnings (slow queries, a journal
	// mode other than WAL). nil discards them.
	Logger *slog.Logger
	// BusyTimeout is how long a statement waits for a lock held by another
	// connection before it fails; <= 0 means DefaultBusyTimeout.
	BusyTimeout time.Duration
	// Lock is the daemon lock of this store, held by the caller (SQLite):
	// Open then locks the database file it creates, records it in the lock
	// file, refuses to create a store that the lock file says existed
	// (*MissingError) unless NewStore, and watches that the file stays the
	// one opened (identity.go).
	Lock *Lock
	// NewStore lets Open create a new, empty store where the lock file
	// records one that is now missing (pacer run -new-store).
	NewStore bool
}

// Open opens the store at dsn, creating the database and its schema if
// needed. dsn is a SQLite file path, or a postgres:// (postgresql://) URL.
// Open does not take the daemon lock: see AcquireLock.
func Open(dsn string, opts Options) (*Store, error) {
	switch {
	case dsn == "":
		return nil, errors.New("store: open: empty store path")
	case backend.IsPostgres(dsn):
		// The DSN may hold a password: errors show it as ***.
		s, err := postgres.Open(dsn, opts.Logger)
		if err != nil {
			return nil, err
		}
		return &Store{Backend: s}, nil
	}
	s, err := openSQLite(dsn, opts, false)
	if err != nil {
		return nil, err
	}
	return &Store{Backend: s}, nil
}

// Missing reports whether dsn names a SQLite file that does not exist yet:
// no daemon has created the store. Read-only commands then have nothing to
// read, and must not create it (Open would). A PostgreSQL DSN is never
// missing: its server is asked.
func Missing(dsn string) bool {
	if backend.IsPostgres(dsn) {
		return false
	}
	_, err := os.Stat(dsn)
	return errors.Is(err, fs.ErrNotExist)
}

// ShownDSN is how the store names the database of dsn in its errors and
// logs: a SQLite path as it is, a PostgreSQL URL without its password
// (shown as ***, rule 3.12).
func ShownDSN(dsn string) string {
	if !backend.IsPostgres(dsn) {
		return dsn
	}
	d, _ := postgres.ParseDSN(dsn)
	return d.Shown
}

// AcquireMemberLock is AcquireLock for a member of a cluster: the shared
// form of the store's advisory lock, which every member holds together and
// which keeps out a daemon started without a cluster section (and is kept
// out by one), so that no source is polled by two daemons that do not
// share the work. A SQLite store has no cluster.
func AcquireMemberLock(dsn string) (*Lock, error) {
	if !backend.IsPostgres(dsn) {
		return nil, ErrNoCluster
	}
	return acquirePostgresLockWith(dsn, "pg_try_advisory_lock_shared")
}
