package sqlcore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/pacer-dev/pacer/domain"
)

// The queue of the CLI's commands to a running daemon (domain.Command),
// the same SQL on both dialects.

const tableCommands = "commands"

// commandModel is a row of commands: a domain.Command with its columns'
// tags (the same fields, so that one converts to the other for free).
type commandModel struct {
	ID        uint64 `gorm:"primaryKey;autoIncrement"`
	Source    string `gorm:"size:255"`
	Action    string `gorm:"size:16"`
	Reason    string
	CreatedAt time.Time
	// DoneAt is indexed: the daemon asks for pending commands every
	// second or so.
	DoneAt *time.Time `gorm:"index"`
	Result string
	Code   string `gorm:"size:16"`
	Status string `gorm:"size:16;not null;default:('pending')"`
}

// TableName pins the table of commandModel.
func (commandModel) TableName() string { return tableCommands }

// command is the domain.Command of a row, its times normalized.
func (m *commandModel) command() domain.Command {
	c := domain.Command(*m)
	c.CreatedAt = NormTime(c.CreatedAt)
	c.DoneAt = normTimePtr(c.DoneAt)
	return c
}

// EnqueueCommand stores a command for the running daemon. It sets c.ID,
// c.CreatedAt (now, UTC) and c.Status (CommandPending); the other fields
// are stored as given.
func (s *Core) EnqueueCommand(ctx context.Context, c *domain.Command) error {
	if c == nil {
		return errors.New("store: enqueue command: nil command")
	}
	row := commandModel(*c)
	row.DoneAt = normTimePtr(row.DoneAt)
	row.CreatedAt = Now()
	row.Status = domain.CommandPending
	if err := s.DB.WithContext(ctx).Create(&row).Error; err != nil {
		return fmt.Errorf("store: enqueue command: %w", err)
	}
	*c = row.command()
	return nil
}

// PendingCommands returns the commands neither claimed nor done, oldest
// first, at most MaxPendingCommands of them. The daemon applies one only
// after ClaimCommand succeeds on it.
//
// The daemon asks every 250 ms and there is almost never one: a prepared
// look-up of the index on done_at answers that first, and gorm's query
// (its statement built and parsed anew each time, ~0.2 % of a core at
// that rate) runs only when there is one.
func (s *Core) PendingCommands(ctx context.Context) ([]domain.Command, error) {
	out := make([]domain.Command, 0)
	var one int
	switch err := s.w.anyCommand.QueryRowContext(s.dia.StmtContext(ctx), domain.CommandPending).Scan(&one); {
	case errors.Is(err, sql.ErrNoRows):
		return out, nil
	case err != nil:
		return nil, fmt.Errorf("store: pending commands: %w", err)
	}
	return openCommands(s.DB.WithContext(ctx), domain.CommandPending)
}

// openCommands returns the commands not done with status, oldest first, at
// most MaxPendingCommands of them, their times normalized.
func openCommands(db *gorm.DB, status string) ([]domain.Command, error) {
	var rows []commandModel
	err := db.
		Where("done_at IS NULL AND status = ?", status).
		Order("id").
		Limit(MaxPendingCommands).
		Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("store: %s commands: %w", status, err)
	}
	out := make([]domain.Command, len(rows))
	for i := range rows {
		out[i] = rows[i].command()
	}
	return out, nil
}

// ClaimCommand moves a pending command to CommandApplying, in one
// conditional update, and reports whether it did: false means the CLI
// withdrew it (ExpireCommand) or another claim won, and the command must
// not be applied. With ExpireCommand's update it makes "applied" and
// "reported as not applied" exclusive.
func (s *Core) ClaimCommand(ctx context.Context, id uint64) (bool, error) {
	res := s.DB.WithContext(ctx).Model(&commandModel{}).
		Where("id = ? AND done_at IS NULL AND status = ?", id, domain.CommandPending).
		Update("status", domain.CommandApplying)
	if res.Error != nil {
		return false, fmt.Errorf("store: claim command %d: %w", id, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// ExpireCommand withdraws a command that no daemon has claimed: it is done,
// with status CommandExpired and result reason, and no daemon applies it
// afterwards. It reports whether it did; false means a daemon claimed it
// (or it is done): its result is then the daemon's, to be waited for.
func (s *Core) ExpireCommand(ctx context.Context, id uint64, reason string) (bool, error) {
	res := s.DB.WithContext(ctx).Model(&commandModel{}).
		Where("id = ? AND done_at IS NULL AND status = ?", id, domain.CommandPending).
		Updates(map[string]any{"status": domain.CommandExpired, "done_at": Now(), "result": reason})
	if res.Error != nil {
		return false, fmt.Errorf("store: expire command %d: %w", id, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// OrphanedCommands returns the commands claimed (CommandApplying) and not
// done, oldest first, at most MaxPendingCommands of them. On a store one
// daemon holds, these were claimed by a daemon that stopped before it
// recorded their results (a crash between the two): the daemon that holds
// the store next completes them, so that a CLI waiting for one gets an
// answer.
func (s *Core) OrphanedCommands(ctx context.Context) ([]domain.Command, error) {
	return openCommands(s.DB.WithContext(ctx), domain.CommandApplying)
}

// CompleteCommand marks a command done with its result ("" = success) and
// code ("not_found", "conflict" or ""). Completing a command that is already
// done (or expired) keeps the first result and is not an error; an unknown
// id is ErrNotFound.
func (s *Core) CompleteCommand(ctx context.Context, id uint64, result, code string) error {
	db := s.DB.WithContext(ctx)
	res := db.Model(&commandModel{}).
		Where("id = ? AND done_at IS NULL", id).
		Updates(map[string]any{"done_at": Now(), "result": result, "code": code, "status": domain.CommandDone})
	if res.Error != nil {
		return fmt.Errorf("store: complete command %d: %w", id, res.Error)
	}
	if res.RowsAffected > 0 {
		return nil
	}
	var n int64
	if err := db.Model(&commandModel{}).Where("id = ?", id).Count(&n).Error; err != nil {
		return fmt.Errorf("store: complete command %d: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("store: complete command %d: %w", id, ErrNotFound)
	}
	return nil
}

// GetCommand returns one command, so that the CLI can wait for its result.
// An unknown id is ErrNotFound.
func (s *Core) GetCommand(ctx context.Context, id uint64) (domain.Command, error) {
	var rows []commandModel
	if err := s.DB.WithContext(ctx).Where("id = ?", id).Limit(1).Find(&rows).Error; err != nil {
		return domain.Command{}, fmt.Errorf("store: get command %d: %w", id, err)
	}
	if len(rows) == 0 {
		return domain.Command{}, fmt.Errorf("store: get command %d: %w", id, ErrNotFound)
	}
	return rows[0].command(), nil
}
