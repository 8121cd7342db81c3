// Package postgres is the PostgreSQL backend of the store: the shared core
// (store/internal/sqlcore) on a small pool of connections, and the
// cluster's shards, claims and fenced commits (contract section 8).
// Package store opens it (store.Open).
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	gormpg "gorm.io/driver/postgres"
	"gorm.io/gorm"

	"github.com/pacer-dev/pacer/store/internal/sqlcore"
)

// The PostgreSQL backend: the same tables (sqlcore's models.go, created by
// gorm's Migrator with PostgreSQL's types: bigint, text, bytea, boolean,
// timestamptz), the same hand-written SQL for Commit and LoadStates with
// PostgreSQL's bind variables and bytea concatenation (the dialect), and a
// small pool of connections instead of SQLite's single one: PostgreSQL
// serialises the writers itself (row locks, taken in the table's order by
// every batch, so that two writers cannot deadlock).

// pgMaxConns bounds the store's connections to the server: the flusher's
// transaction, the command loop and the probes of /readyz each take one.
const pgMaxConns = 4

// pgConnectTimeout bounds the connection to the server when the URL sets no
// connect_timeout, so that a server that does not answer fails the start.
const pgConnectTimeout = 10 * time.Second

// pgCreateLock is the key of the transaction-level advisory lock under
// which a new store's tables are created, so that two processes opening a
// new store at once do not both create them (the second then finds them).
const pgCreateLock = 0x70616373 // "pacs"

// Store is the PostgreSQL backend: the core on a pool of connections, and
// the cluster (cluster.go, member_shards.go).
type Store struct {
	*sqlcore.Core
}

// dialect is PostgreSQL's SQL.
type dialect struct{}

func (dialect) Bind(i int) string { return "$" + strconv.Itoa(i) }

// BlobConcat: PostgreSQL's || of two bytea is a bytea.
func (dialect) BlobConcat(a, b string) string { return a + " || " + b }

// StmtContext is ctx: PostgreSQL's driver watches the context without a
// goroutine per statement.
func (dialect) StmtContext(ctx context.Context) context.Context { return ctx }

// DataVersion is none: the members of a cluster share the tables, so the
// state rows are always written whole (sqlcore's narrow.go).
func (dialect) DataVersion() string { return "" }

// StatesOrder: PostgreSQL's heap has no order; its primary key index
// gives it.
func (dialect) StatesOrder() string { return "ORDER BY skey, name" }

// ClaimLock skips the rows another claimer is taking.
func (dialect) ClaimLock() string { return " FOR UPDATE OF e SKIP LOCKED" }

func (dialect) Elsewhere() string {
	return "set store: to another database, or another schema (search_path=)"
}

// Tables is the store's tables and the cluster's.
func (dialect) Tables() []sqlcore.Model { return append(sqlcore.Models(), clusterModels()...) }

// CreateTables creates the missing tables, the cluster's included, under a
// transaction-level advisory lock: SQLite's write lock is taken at BEGIN,
// PostgreSQL's DDL takes none that would keep a second creator out.
func (dialect) CreateTables(tx *gorm.DB) error {
	if err := tx.Exec("SELECT pg_advisory_xact_lock(?, hashtext(current_schema()))", pgCreateLock).Error; err != nil {
		return fmt.Errorf("lock schema creation: %w", err)
	}
	if err := sqlcore.CreateTables(tx, ""); err != nil {
		return err
	}
	return createClusterTables(tx)
}

// Upgrade adds the cluster's later columns.
func (dialect) Upgrade(db *gorm.DB) error { return addClusterColumns(db) }

// LimitWait has nothing to do: PostgreSQL's driver heeds ctx.
func (dialect) LimitWait(context.Context, *gorm.DB) (func(), error) { return func() {}, nil }

// DSN is a PostgreSQL store URL taken apart for what the store shows of
// it: shown is the URL with its password (in the user info or a password
// parameter) replaced by ***, secrets the texts to mask in any error.
type DSN struct {
	Shown   string
	secrets []string
}

// ParseDSN parses a postgres:// or postgresql:// URL. Its error never
// quotes the URL (it may hold a password).
func ParseDSN(dsn string) (DSN, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return DSN{Shown: "postgres://(invalid URL)"}, fmt.Errorf("invalid PostgreSQL URL: %w", err)
	}
	var d DSN
	var b strings.Builder
	b.WriteString(u.Scheme + "://")
	if u.User != nil {
		b.WriteString(u.User.Username())
		if pw, ok := u.User.Password(); ok {
			b.WriteString(":***")
			d.secrets = append(d.secrets, pw, url.QueryEscape(pw), url.PathEscape(pw))
		}
		b.WriteByte('@')
	}
	b.WriteString(u.Host + u.EscapedPath())
	q := u.Query()
	if pw := q.Get("password"); pw != "" {
		d.secrets = append(d.secrets, pw, url.QueryEscape(pw))
		q.Set("password", "***")
	}
	if len(q) > 0 {
		b.WriteString("?" + strings.ReplaceAll(q.Encode(), "%2A%2A%2A", "***"))
	}
	d.Shown = b.String()
	return d, nil
}

// Scrub masks the secrets of d in err's text (a driver error could quote
// the URL); nil stays nil. The result does not unwrap to err, so that no
// caller can print the unmasked text by accident.
func (d DSN) Scrub(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, s := range d.secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, "***")
		}
	}
	return errors.New(msg)
}

// ConnConfig parses dsn into pgx's connection settings (host= in the query
// selects a unix socket directory; search_path and other parameters that
// pgx does not know are sent to the server as settings of the session).
func ConnConfig(dsn string, d DSN) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, d.Scrub(err)
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = pgConnectTimeout
	}
	return cfg, nil
}

// Open opens the PostgreSQL store at dsn, creating its tables if
// needed.
func Open(dsn string, log *slog.Logger) (*Store, error) {
	d, err := ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", d.Shown, err)
	}
	fail := func(err error) error { return fmt.Errorf("store: open %s: %w", d.Shown, d.Scrub(err)) }
	cfg, err := ConnConfig(dsn, d)
	if err != nil {
		return nil, fail(err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sqlDB := stdlib.OpenDB(*cfg)
	sqlDB.SetMaxOpenConns(pgMaxConns)
	sqlDB.SetMaxIdleConns(pgMaxConns)
	sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	closeFail := func(err error) (*Store, error) { return nil, errors.Join(fail(err), sqlDB.Close()) }
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ConnectTimeout+time.Second)
	defer cancel()
	if err := sqlDB.PingContext(ctx); err != nil {
		return closeFail(err)
	}
	var schema *string
	if err := sqlDB.QueryRowContext(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		return closeFail(err)
	}
	if schema == nil {
		// pacer creates its tables, not the schema they go into.
		return closeFail(errors.New("no schema of search_path exists in the database: create it (CREATE SCHEMA), or set search_path= to one that exists"))
	}
	db, err := gorm.Open(gormpg.New(gormpg.Config{Conn: sqlDB}), &gorm.Config{
		Logger:                 sqlcore.NewGormLogger(log),
		NowFunc:                sqlcore.Now,
		SkipDefaultTransaction: true,
	})
	if err != nil {
		return closeFail(err)
	}
	core, err := sqlcore.New(db, sqlDB, dialect{})
	if err != nil {
		return closeFail(err)
	}
	return &Store{Core: core}, nil
}
