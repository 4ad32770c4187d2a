package store

import (
	"context"
	_ "embed" // the statements

	"github.com/jackc/pgx/v5"
)

var (
	//go:embed sql/status_slots.sql
	statusSlotsSQL string
	//go:embed sql/status_topics.sql
	statusTopicsSQL string
	//go:embed sql/status_failed.sql
	statusFailedSQL string
	//go:embed sql/status_standby_slots.sql
	statusStandbySlotsSQL string
)

// Slot is a replication slot of the database.
type Slot struct {
	Name      string `json:"name"`
	Plugin    string `json:"plugin"`
	Active    bool   `json:"active"`
	ActivePID int    `json:"active_pid,omitempty"`
	WALStatus string `json:"wal_status"`
	LagBytes  int64  `json:"lag_bytes"`
	// Failover and Synced are PostgreSQL 17's: a failover slot, and one a
	// standby synchronized from its primary. Nil before 17.
	Failover *bool `json:"failover,omitempty"`
	Synced   *bool `json:"synced,omitempty"`
}

// StandbySlot is a standby's physical slot named in the primary's
// synchronized_standby_slots: failover slots wait for it.
type StandbySlot struct {
	Name   string `json:"name"`
	Active bool   `json:"active"`
	Exists bool   `json:"exists"`
	// BehindBytes is how far its standby's confirmed WAL is behind the
	// primary's.
	BehindBytes int64 `json:"behind_bytes"`
	// Confirmed is its standby's confirmed WAL position, and WALEnd the
	// primary's, as byte offsets (LSNs).
	Confirmed uint64 `json:"-"`
	WALEnd    uint64 `json:"-"`
}

// TopicStatus is how many events of a table and topic have a status.
type TopicStatus struct {
	Table  string `json:"table"` // outbox.events or a mapped table
	Topic  string `json:"topic"`
	Status string `json:"status"`
	Events int64  `json:"events"`
}

// ReasonCount is how many events are FAILED for a reason.
type ReasonCount struct {
	Reason string `json:"reason"`
	Events int64  `json:"events"`
}

// Overview is what `outbox-relay status` shows of the database.
type Overview struct {
	Slots        []Slot        `json:"slots"`
	StandbySlots []StandbySlot `json:"synchronized_standby_slots,omitempty"`
	Topics       []TopicStatus `json:"topics"`
	Failed       []ReasonCount `json:"failed_by_reason"`
}

// Overview reads the slots, the counts per topic and status, and FAILED
// events by reason: every status row (the console reads OverviewCounts).
func (s *Store) Overview(ctx context.Context) (*Overview, error) {
	o := &Overview{}
	var err error
	if o.Slots, err = s.Slots(ctx); err != nil {
		return nil, err
	}
	if o.StandbySlots, err = s.StandbySlots(ctx); err != nil {
		return nil, err
	}
	if o.Topics, err = s.groupCounts(ctx, statusTopicsSQL); err != nil {
		return nil, err
	}
	if o.Failed, err = s.FailedByReason(ctx, 0); err != nil {
		return nil, err
	}
	return o, nil
}

// Slots reads the database's replication slots.
func (s *Store) Slots(ctx context.Context) ([]Slot, error) {
	return collect(ctx, s.db, "reading slots", func(r pgx.CollectableRow) (Slot, error) {
		var x Slot
		return x, r.Scan(&x.Name, &x.Plugin, &x.Active, &x.ActivePID, &x.WALStatus, &x.LagBytes, &x.Failover, &x.Synced)
	}, statusSlotsSQL)
}

// FailedByReason counts FAILED events by reason, most first, of at most
// limit FAILED rows (0: all).
func (s *Store) FailedByReason(ctx context.Context, limit int) ([]ReasonCount, error) {
	var bound *int
	if limit > 0 {
		bound = &limit
	}
	return collect(ctx, s.db, "reading failures by reason", func(r pgx.CollectableRow) (ReasonCount, error) {
		var x ReasonCount
		return x, r.Scan(&x.Reason, &x.Events)
	}, statusFailedSQL, bound)
}

// StandbySlots reads the standbys' slots named in synchronized_standby_slots
// (none before PostgreSQL 17).
func (s *Store) StandbySlots(ctx context.Context) ([]StandbySlot, error) {
	return collect(ctx, s.db, "reading synchronized_standby_slots", func(r pgx.CollectableRow) (StandbySlot, error) {
		var x StandbySlot
		return x, r.Scan(&x.Name, &x.Active, &x.Exists, &x.BehindBytes, &x.Confirmed, &x.WALEnd)
	}, statusStandbySlotsSQL)
}
