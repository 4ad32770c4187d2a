package relay

import (
	"testing"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/store"
)

func TestLagWatch_AConnectedStandbyBehindForTheLimitHoldsTheSlotBack(t *testing.T) {
	t.Parallel()
	start := time.Unix(1000, 0)
	slot := func(confirmed, walEnd uint64) []store.StandbySlot {
		return []store.StandbySlot{{Name: "sb", Exists: true, Active: true, Confirmed: confirmed, WALEnd: walEnd,
			BehindBytes: int64(walEnd - confirmed)}}
	}
	cases := []struct {
		name  string
		reads [][]store.StandbySlot // one read a second
		held  bool
	}{
		{"CaughtUp", [][]store.StandbySlot{slot(100, 100), slot(200, 200), slot(300, 300)}, false},
		{"BehindButPassingEachMark", [][]store.StandbySlot{slot(90, 100), slot(150, 200), slot(250, 300), slot(350, 400)}, false},
		{"StuckPastTheLimit", [][]store.StandbySlot{slot(90, 100), slot(90, 200), slot(95, 300), slot(99, 400)}, true},
		{"StuckButNotForTheLimit", [][]store.StandbySlot{slot(90, 100), slot(90, 200), slot(100, 300)}, false},
		{"NotConnected", [][]store.StandbySlot{
			{{Name: "sb", Exists: true, Confirmed: 90, WALEnd: 100}}, {{Name: "sb", Exists: true, Confirmed: 90, WALEnd: 900}},
			{{Name: "sb", Exists: true, Confirmed: 90, WALEnd: 900}}, {{Name: "sb", Exists: true, Confirmed: 90, WALEnd: 900}}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := lagWatch{limit: 3 * time.Second, marks: map[string]lagMark{}}
			var held bool
			var h heldBack
			for i, r := range tc.reads {
				h, held = w.update(r, start.Add(time.Duration(i)*time.Second))
			}
			if held != tc.held {
				t.Fatalf("held back = %v (%+v), want %v", held, h, tc.held)
			}
			if held && h.standbySlot != "sb" {
				t.Fatalf("held back for %q, want sb", h.standbySlot)
			}
		})
	}
}
