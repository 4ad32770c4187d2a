package cdc

import (
	"net"
	"testing"
	"time"
)

// deadlines is a connection that records its read deadlines.
type deadlines struct {
	net.Conn
	set []time.Time
}

func (d *deadlines) SetReadDeadline(t time.Time) error {
	d.set = append(d.set, t)
	return nil
}

func TestReadDeadline_IsSetOnlyWhenTheWantedOneIsEarlierOrThePreviousHasPassed(t *testing.T) {
	conn := &deadlines{}
	wait := readDeadline{conn: conn}
	now := time.Now()
	at := now.Add(time.Second)

	steps := []struct {
		what string
		dl   time.Time
		now  time.Time
		want int // read deadlines set so far
	}{
		{"the first read", at, now, 1},
		{"the same deadline", at, now, 1},
		{"a later deadline: ending early only costs a turn", at.Add(time.Minute), now, 1},
		{"an earlier deadline", at.Add(-time.Millisecond), now, 2},
		{"the previous deadline has passed", at.Add(time.Minute), at, 3},
	}
	for _, s := range steps {
		if err := wait.by(s.dl, s.now); err != nil {
			t.Fatal(err)
		}
		if len(conn.set) != s.want {
			t.Fatalf("%s: %d deadlines set, want %d", s.what, len(conn.set), s.want)
		}
		if last := conn.set[len(conn.set)-1]; last.After(s.dl) {
			t.Fatalf("%s: the read may wait until %v, past %v", s.what, last, s.dl)
		}
	}
}
