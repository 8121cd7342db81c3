package sqlcore

import (
	"context"
	"fmt"

	"gorm.io/gorm/clause"

	"github.com/pacer-dev/pacer/domain"
)

// The state of the host groups (contract section 13): what each host's
// throttling, breaker and learned limits are, as the scheduler's host room
// encodes it (domain.HostState.Data, opaque here), so that a restart and
// every member of a cluster start from it. A table that came after schema
// 3's first stores: Open creates it in a store that lacks it.

const tableHosts = "host_states"

// hostModel is a row of host_states.
type hostModel struct {
	Host      string `gorm:"primaryKey;not null"`
	Data      []byte `gorm:"not null"`
	UpdatedAt int64  `gorm:"not null;default:0;autoUpdateTime:false"`
}

// TableName pins the table of hostModel.
func (hostModel) TableName() string { return tableHosts }

// SaveHosts writes the given hosts' states, each replacing the one stored.
func (s *Core) SaveHosts(ctx context.Context, hs []domain.HostState) error {
	if len(hs) == 0 {
		return nil
	}
	rows := make([]hostModel, len(hs))
	for i, h := range hs {
		if h.Host == "" {
			return fmt.Errorf("store: save hosts: host #%d has no name", i)
		}
		rows[i] = hostModel{Host: h.Host, Data: h.Data, UpdatedAt: micros(h.UpdatedAt)}
	}
	err := s.DB.WithContext(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "host"}},
		DoUpdates: clause.AssignmentColumns([]string{"data", "updated_at"}),
	}).CreateInBatches(rows, 500).Error
	if err != nil {
		return fmt.Errorf("store: save hosts: %w", err)
	}
	return nil
}

// LoadHosts reads every stored host state.
func (s *Core) LoadHosts(ctx context.Context) ([]domain.HostState, error) {
	var rows []hostModel
	if err := s.DB.WithContext(ctx).Order("host").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: load hosts: %w", err)
	}
	out := make([]domain.HostState, len(rows))
	for i, r := range rows {
		out[i] = domain.HostState{Host: r.Host, Data: r.Data, UpdatedAt: fromMicros(r.UpdatedAt)}
	}
	return out, nil
}
