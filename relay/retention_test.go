package relay

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

// TestRetention_BacksOffWhileTheSlotLagsOrStatusWritesSlowAndResumes runs a
// retention walk over 50 old SENT events, 10 a batch, against a real slot:
// while the slot is behind it deletes nothing and its waits double; once the
// slot catches up it deletes again; while the status statements turn slow it
// backs off the same way, and it finishes once they are fast again.
func TestRetention_BacksOffWhileTheSlotLagsOrStatusWritesSlowAndResumes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := pgtest.Migrated(t)
	exec := func(sql string) { t.Helper(); pgtest.Exec(t, pool, sql) }
	exec(`WITH ev AS (INSERT INTO outbox.events (topic, payload, created_at)
		SELECT 'orders', '{}', now() - interval '10 days' - i * interval '1 second' FROM generate_series(1, 50) i RETURNING id)
		INSERT INTO outbox.deliveries (event_id, status, attempts) SELECT id, 'SENT', 1 FROM ev`)
	exec(`SELECT pg_create_logical_replication_slot('retention_pace', 'pgoutput')`)
	t.Cleanup(func() {
		_, _ = pool.Exec(context.WithoutCancel(ctx), `SELECT pg_drop_replication_slot('retention_pace')`)
	})
	exec(`SELECT pg_logical_emit_message(true, 'test', repeat('x', 2 << 20))`) // 2 MiB the slot has not confirmed, flushed by the commit

	status := &statusLatency{}
	for range 50 {
		status.observe(time.Millisecond) // the baseline: 1 ms a statement
	}
	var deleted int64
	type pause struct {
		Wait    time.Duration
		Deleted int64 // events deleted when the wait began
	}
	var lagWaits, slowWaits []pause
	phase := "lag"
	r := &retainer{store: store.New(pool), age: 7 * 24 * time.Hour, log: zaptest.NewLogger(t),
		deleted: func(n int64) { deleted += n },
		slot:    "retention_pace", maxLag: 1 << 20, status: status, batch: 10,
		sleep: func(ctx context.Context, d time.Duration) bool {
			if phase != "lag" {
				// The lag is to the server's WAL position, which the other
				// tests' writes move on: keep the slot caught up, or a walk
				// past the lag phase waits for ever (it did, once, under load).
				exec(`SELECT pg_replication_slot_advance('retention_pace', pg_current_wal_lsn())`)
			}
			switch phase {
			case "lag":
				if lagWaits = append(lagWaits, pause{d, deleted}); len(lagWaits) == 3 {
					exec(`SELECT pg_replication_slot_advance('retention_pace', pg_current_wal_lsn())`)
					phase = "caught up"
				}
			case "caught up":
				if deleted >= 20 {
					for range 20 {
						status.observe(50 * time.Millisecond)
					}
					phase = "slow"
				}
			case "slow":
				if slowWaits = append(slowWaits, pause{d, deleted}); len(slowWaits) == 3 {
					for range 40 {
						status.observe(time.Millisecond)
					}
					phase = "fast"
				}
			}
			return ctx.Err() == nil
		}}

	total := r.walk(ctx, false, store.RetentionCursor{}, time.Now().Add(-r.age), nil)

	want := func(deletedBefore int64) string { // three doubling waits, nothing deleted meanwhile
		return fmt.Sprint([]pause{{retentionBackoff, deletedBefore}, {2 * retentionBackoff, deletedBefore}, {4 * retentionBackoff, deletedBefore}})
	}
	if got, w := fmt.Sprint(lagWaits), want(0); got != w {
		t.Errorf("waits (and events deleted by then) while the slot was 2 MiB behind a 1 MiB limit: %s, want %s: nothing deleted, each wait doubled", got, w)
	}
	if phase != "fast" {
		t.Fatalf("the walk ended in phase %q with %d deleted: it did not resume after the slot caught up, or never backed off for slow status statements", phase, deleted)
	}
	if got, w := fmt.Sprint(slowWaits), want(slowWaits[0].Deleted); got != w || slowWaits[0].Deleted < 20 {
		t.Errorf("waits while the status statements took 50 ms against a 1 ms baseline: %s, want %s (after at least 20 deleted): nothing deleted, each wait doubled", got, w)
	}
	if total != 50 || deleted != 50 {
		t.Errorf("walk deleted %d (counted %d), want all 50 once the stream was at ease again", total, deleted)
	}
}

// TestRetentionPace_SpeedsUpWhileBehindAndIsBackAtItsBaseOnceCaughtUp
// checks the pause between retention's batches: at its base pace 4 times a
// batch's time and at least 10 ms (a batch of 100 every 10 ms can never
// delete 10,000 events a second); while the events it deletes are more than
// two minutes past the retention and the stream's tail is not past one and
// a half times its usual (warm), a tenth shorter every quarter second (not
// every batch) down to half a batch's time (floor 1.25 ms); back at the base
// pace as soon as they are not, or the stream is warm.
func TestRetentionPace_SpeedsUpWhileBehindAndIsBackAtItsBaseOnceCaughtUp(t *testing.T) {
	cutoff := time.Now()
	old, recent := cutoff.Add(-time.Hour), cutoff.Add(-30*time.Second)
	at := cutoff
	tick := func() time.Time { at = at.Add(retentionSpeedupEvery); return at }
	p := newRetentionPace()
	if got := p.after(tick(), 2*time.Millisecond, &recent, cutoff, false, 0); got != retentionPause {
		t.Fatalf("a 2 ms batch, caught up: pause %s, want %s (the floor)", got, retentionPause)
	}
	if got := p.after(tick(), 10*time.Millisecond, &recent, cutoff, false, 0); got != 40*time.Millisecond {
		t.Fatalf("a 10 ms batch, caught up: pause %s, want 40ms (4 times its time)", got)
	}
	var pauses []time.Duration
	for range 40 {
		pauses = append(pauses, p.after(tick(), 2*time.Millisecond, &old, cutoff, false, 0))
	}
	for i := 1; i < len(pauses); i++ {
		if pauses[i] > pauses[i-1] {
			t.Fatalf("pauses while behind grew: %v", pauses)
		}
	}
	if first := pauses[0]; first != 9*time.Millisecond {
		t.Errorf("first pause while behind: %s, want 9ms (the floor a tenth shorter)", first)
	}
	if last := pauses[len(pauses)-1]; last != 1250*time.Microsecond {
		t.Errorf("pause after 40 quarter seconds behind: %s, want 1.25ms (the floor at half the base's floor)", last)
	}
	if got := p.after(tick(), 20*time.Millisecond, &old, cutoff, false, 0); got != 10*time.Millisecond {
		t.Errorf("a 20 ms batch at the fastest pace: pause %s, want 10ms (half its time)", got)
	}
	if got := p.after(tick(), 2*time.Millisecond, &recent, cutoff, false, 0); got != retentionPause {
		t.Errorf("caught up again: pause %s, want %s", got, retentionPause)
	}
	if got := p.after(tick(), 2*time.Millisecond, nil, cutoff, false, 0); got != retentionPause {
		t.Errorf("nothing walked: pause %s, want %s", got, retentionPause)
	}
	for range 40 {
		p.after(tick(), 2*time.Millisecond, &old, cutoff, false, 0)
	}
	if got := p.after(tick(), 2*time.Millisecond, &old, cutoff, true, 0); got != retentionPause {
		t.Errorf("behind at its fastest, the stream's tail past one and a half times its usual: pause %s, want %s (the base pace)", got, retentionPause)
	}
	if got := p.after(tick(), 2*time.Millisecond, &old, cutoff, false, 0); got != 9*time.Millisecond {
		t.Errorf("behind, the stream's tail back within its bound: pause %s, want 9ms (speeding up again from the base)", got)
	}
}

// TestRetentionPace_SpeedsUpNoFasterThanTheStreamCanShowIt: the stream's
// tail, what stops retention speeding up, is a second's slowest event, so
// 40 batches behind in one second (batches of 1 ms, 25 ms apart) must not
// take it from its base pace to its fastest:
// a step per batch did (the growth bench's run 17: strain of 65-160 ms
// within 2 s of each start), a step a quarter second takes four.
func TestRetentionPace_SpeedsUpNoFasterThanTheStreamCanShowIt(t *testing.T) {
	cutoff := time.Now()
	old := cutoff.Add(-time.Hour)
	p := newRetentionPace()
	p.after(cutoff, time.Millisecond, &old, cutoff, true, 0) // just reset to the base pace
	var pause time.Duration
	for i := range 40 {
		pause = p.after(cutoff.Add(time.Duration(i+1)*25*time.Millisecond), time.Millisecond, &old, cutoff, false, 0)
	}
	if want := time.Duration(float64(retentionPause) * 0.9 * 0.9 * 0.9 * 0.9); pause != want {
		t.Errorf("pause after 40 batches behind in a second: %s, want %s (four steps of a tenth from the base's %s)", pause, want, retentionPause)
	}
}

// TestRetentionPace_HoldsTheStreamsPaceWhileItsTailIsWarm: retention's
// base pace alone, a statement in five, moved the stream's p99 at 1,000/s
// to 1.2 to 6.7 times its own at 20,000,000 rows (the growth bench's runs 32
// to 34). While the stream's tail is warm, a batch and its pause take the
// period that deletes 1.25 times the stream's events (keepUp), even when
// that is slower than the base pace; once the tail is not, that period is
// let go of a tenth every quarter second, never faster than the base pace
// until it is gone, and then the pace speeds up while behind as before.
// Caught up and warm, it holds the period too: a minute's events are
// deleted over the minute, not in a fifth of it.
func TestRetentionPace_HoldsTheStreamsPaceWhileItsTailIsWarm(t *testing.T) {
	cutoff := time.Now()
	old, recent := cutoff.Add(-time.Hour), cutoff.Add(-30*time.Second)
	at := cutoff
	tick := func() time.Time { at = at.Add(retentionSpeedupEvery); return at }
	const took, keepUp = 5 * time.Millisecond, 100 * time.Millisecond
	base := retentionYield * took
	p := newRetentionPace()
	if got := p.after(tick(), took, &old, cutoff, true, keepUp); got != keepUp-took {
		t.Fatalf("behind, the tail warm: pause %s, want %s (the keep-up period of %s less the batch's time)", got, keepUp-took, keepUp)
	}
	if got := p.after(tick(), took, &recent, cutoff, true, keepUp); got != keepUp-took {
		t.Fatalf("caught up, the tail warm: pause %s, want %s", got, keepUp-took)
	}
	var pauses []time.Duration
	for range 30 {
		pauses = append(pauses, p.after(tick(), took, &old, cutoff, false, keepUp))
	}
	if want := time.Duration(0.9*float64(keepUp)) - took; pauses[0] != want {
		t.Errorf("first pause once the tail is not warm: %s, want %s (a tenth of the period let go)", pauses[0], want)
	}
	gone := -1
	for i, d := range pauses {
		if i > 0 && d > pauses[i-1] {
			t.Fatalf("pauses once the tail is not warm grew: %v", pauses)
		}
		if d < base && gone < 0 {
			gone = i
		}
	}
	if gone < 0 {
		t.Fatalf("the pace never got past the base pace's %s behind: %v", base, pauses)
	}
	for _, d := range pauses[:gone] {
		if d < base {
			t.Fatalf("faster than the base pace's %s while the period was held: %v", base, pauses)
		}
	}
	if last := pauses[len(pauses)-1]; last >= base {
		t.Errorf("behind, the tail cool for %d quarter seconds: pause %s, want under the base pace's %s (speeding up again)", len(pauses), last, base)
	}
	// A period longer than a quarter second is let go of by the time gone,
	// not a tenth a batch: a second after the tail cooled, four tenths.
	p = newRetentionPace()
	p.after(at, took, &old, cutoff, true, time.Second)
	at = at.Add(time.Second)
	if got, want := p.after(at, took, &old, cutoff, false, time.Second), time.Duration(0.9*0.9*0.9*0.9*float64(time.Second))-took; got != want {
		t.Errorf("a second after the tail cooled, a period of 1 s: pause %s, want %s (four tenths let go)", got, want)
	}
	if got := p.after(tick(), took, &old, cutoff, true, 0); got != base {
		t.Errorf("warm, the stream's rate unknown: pause %s, want the base pace's %s", got, base)
	}
	if got := p.after(tick(), took, &old, cutoff, true, 3*time.Millisecond); got != base {
		t.Errorf("warm, keeping up faster than the base pace: pause %s, want the base pace's %s", got, base)
	}
}

// streamOn observes a status group of n events whose slowest took d every
// 100 ms from fed on, up to to, and returns when the next one is due.
func streamOn(delay *streamDelay, fed, to time.Time, d time.Duration, n int) time.Time {
	for ; !fed.After(to); fed = fed.Add(100 * time.Millisecond) {
		delay.observeGroup(fed, d, n)
	}
	return fed
}

// TestKeepUpPeriod: the faster of walking 1.25 times the stream's rate and
// 1.25 times as fast as the walked events were created, at most 5 s; what
// is not known (a rate of 0, a span of 0) bounds nothing.
func TestKeepUpPeriod(t *testing.T) {
	for _, c := range []struct {
		walked int
		rate   float64
		span   time.Duration
		want   time.Duration
	}{
		{10, 100, time.Hour, 80 * time.Millisecond},
		{10, 10, 100 * time.Millisecond, 80 * time.Millisecond},
		{10, 0, 100 * time.Millisecond, 80 * time.Millisecond},
		{10, 100, 0, 80 * time.Millisecond},
		{10, 0.01, 0, retentionKeepUpMax},
		{10, 0, 0, 0},
		{0, 100, time.Second, 0},
	} {
		if got := keepUpPeriod(c.walked, c.rate, c.span); got != c.want {
			t.Errorf("keepUpPeriod(%d, %v, %s) = %s, want %s", c.walked, c.rate, c.span, got, c.want)
		}
	}
}

// TestRetention_KeepsUpWithTheStreamWhileItsTailIsWarm walks 300 SENT
// events ten days old, 10 a batch, while the stream carries 100 events a
// second and its slowest events take 10 ms against 4 ms for minutes (warm,
// not strained): each batch and the pause after it take at least the 80 ms
// that delete 1.25 times the stream's rate, where the base pace paused 10
// ms (a batch of a few ms, 4 times its time, at least 10 ms), 8 times as
// fast. It deletes every event.
func TestRetention_KeepsUpWithTheStreamWhileItsTailIsWarm(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := withSentEvents(t, 300, "10 days")
	delay := &streamDelay{}
	now := time.Now()
	feedEvents(delay, now.Add(-4*time.Minute), now.Add(-3*time.Second), 4*time.Millisecond, 10)
	fed := streamOn(delay, now.Add(-3*time.Second), now, 10*time.Millisecond, 10)
	period := keepUpPeriod(10, 100, time.Hour)
	if period != 80*time.Millisecond {
		t.Fatalf("keep-up period of 10 events at 100 a second: %s, want 80ms", period)
	}
	type step struct{ pause, batch time.Duration }
	var steps []step
	woke := time.Now()
	r := &retainer{store: store.New(pool), age: 7 * 24 * time.Hour, log: zaptest.NewLogger(t), batch: 10, delay: delay,
		deleted: func(int64) {},
		sleep: func(ctx context.Context, d time.Duration) bool {
			steps = append(steps, step{d, time.Since(woke)})
			fed = streamOn(delay, fed, time.Now(), 10*time.Millisecond, 10) // the stream goes on, as slow, however long the walk takes
			woke = time.Now()
			return ctx.Err() == nil
		}}
	woke = time.Now()
	if total := r.walk(ctx, false, store.RetentionCursor{}, time.Now().Add(-r.age), nil); total != 300 {
		t.Fatalf("walk deleted %d, want all 300", total)
	}
	if len(steps) < 25 {
		t.Fatalf("%d pauses, want one after each full batch: %v", len(steps), steps)
	}
	for i, s := range steps {
		// No more than keeping up needs, unless the base pace's own pause
		// (retentionYield times a slow batch's time: a cold first batch
		// took 23 ms on PostgreSQL 18 in CI) is longer: the slower rules.
		most := max(period, time.Duration(retentionYield*float64(s.batch)))
		if s.pause+s.batch < period || s.pause > most*11/10 {
			t.Fatalf("batch %d took %s and paused %s, want the pause to make up the %s that keeps up with the stream, no more (all: %v)", i+1, s.batch, s.pause, period, steps)
		}
	}
}

// TestRetention_KeepsUpWithTheEventsItWalksWhenTheyCameFasterThanTheStream:
// the events that reach the cut-off were created a retention ago, at
// another rate than the stream's now. Walking 300 SENT events ten days
// old, created 10 ms apart (100 a second), 10 a batch, while the stream
// carries 10 events a second with its tail warm: each batch and its pause
// take at most the 80 ms that walk 1.25 times as fast as those events
// were created, not the 800 ms that keep up with the stream, which would
// fall behind the cut-off by 7 s of events a minute.
func TestRetention_KeepsUpWithTheEventsItWalksWhenTheyCameFasterThanTheStream(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := withSentEventsApart(t, 300, "10 days", 10*time.Millisecond)
	delay := &streamDelay{}
	now := time.Now()
	feedEvents(delay, now.Add(-4*time.Minute), now.Add(-3*time.Second), 4*time.Millisecond, 1)
	fed := streamOn(delay, now.Add(-3*time.Second), now, 10*time.Millisecond, 1)
	if got := keepUpPeriod(10, 10, 100*time.Millisecond); got != 80*time.Millisecond {
		t.Fatalf("keep-up period of 10 events created over 100 ms, the stream at 10 a second: %s, want 80ms", got)
	}
	var pauses []time.Duration
	r := &retainer{store: store.New(pool), age: 7 * 24 * time.Hour, log: zaptest.NewLogger(t), batch: 10, delay: delay,
		deleted: func(int64) {},
		sleep: func(ctx context.Context, d time.Duration) bool {
			pauses = append(pauses, d)
			fed = streamOn(delay, fed, time.Now(), 10*time.Millisecond, 1)
			return ctx.Err() == nil
		}}
	if total := r.walk(ctx, false, store.RetentionCursor{}, time.Now().Add(-r.age), nil); total != 300 {
		t.Fatalf("walk deleted %d, want all 300", total)
	}
	held := 0
	for i, d := range pauses[1:] { // the first batch's span is from the zero cursor
		if d >= 80*time.Millisecond {
			t.Fatalf("pause %d: %s, want under the 80 ms that walk 1.25 times as fast as the events were created (all: %v)", i+2, d, pauses)
		}
		if d > 20*time.Millisecond {
			held++
		}
	}
	if held < len(pauses)/2 {
		t.Errorf("%d of %d pauses over 20 ms, want most held near 80 ms less the batch's time, slower than the base pace (all: %v)", held, len(pauses), pauses)
	}
}

// TestRetention_DeletesABacklogFasterThanItsBasePace walks 600 SENT events
// ten days old, 10 a batch, with a retention of 7 days, pausing as told:
// once it has seen it is behind for a while, each pause is shorter than the
// base pace's for the same batch (4 times the batch's time, at least 10 ms;
// the batch's time read here as the time from the end of one pause to the
// next, which holds the statement's), and it deletes every event. (A bound
// of 10 ms alone failed on a loaded machine: 3.6 times a batch of 2.96 ms
// is 10.65 ms, a quarter second into the walk.)
func TestRetention_DeletesABacklogFasterThanItsBasePace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := withSentEvents(t, 600, "10 days")
	type pause struct{ got, base time.Duration }
	var pauses []pause
	var deleted int64
	woke := time.Now()
	r := &retainer{store: store.New(pool), age: 7 * 24 * time.Hour, log: zaptest.NewLogger(t),
		deleted: func(n int64) { deleted += n }, batch: 10,
		sleep: func(ctx context.Context, d time.Duration) bool {
			pauses = append(pauses, pause{d, max(retentionPause, retentionYield*time.Since(woke))})
			time.Sleep(d)
			woke = time.Now()
			return ctx.Err() == nil
		}}
	woke = time.Now()
	total := r.walk(ctx, false, store.RetentionCursor{}, time.Now().Add(-r.age), nil)
	if total != 600 || deleted != 600 {
		t.Fatalf("walk deleted %d (counted %d), want 600", total, deleted)
	}
	if len(pauses) < 50 {
		t.Fatalf("%d pauses, want one after each of 59 full batches: %v", len(pauses), pauses)
	}
	for i, p := range pauses[len(pauses)/2:] {
		if p.got >= p.base {
			t.Fatalf("pause %d of a walk of a 3-day backlog: %s, want the second half under the base pace's %s for the same batch (all, with the base's: %v)", len(pauses)/2+i+1, p.got, p.base, pauses)
		}
	}
}

// TestRetention_KeepsItsBasePaceWhileStreamedEventsComeOverTwiceTheirUsual
// walks 300 SENT events ten days old, 10 a batch, while the stream's
// slowest events, 4 ms from commit to Kafka for minutes, take 10 ms: late
// by less than the 20 ms that stops retention, but past twice the usual
// (and one and a half times, the bound), which moves the stream's p99 past
// twice its own (the growth
// bench's run 11: p99 13.4 ms against 4.7 while it deleted at its fastest,
// the tail never 20 ms over its floor). It deletes every event at its base
// pace: no pause shorter than the base pace's floor.
func TestRetention_KeepsItsBasePaceWhileStreamedEventsComeOverTwiceTheirUsual(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := withSentEvents(t, 300, "10 days")
	delay := &streamDelay{}
	now := time.Now()
	feed(delay, now.Add(-4*time.Minute), now.Add(-3*time.Second), 4*time.Millisecond)
	feed(delay, now.Add(-2900*time.Millisecond), now.Add(time.Minute), 10*time.Millisecond)
	var pauses []time.Duration
	var deleted int64
	r := &retainer{store: store.New(pool), age: 7 * 24 * time.Hour, log: zaptest.NewLogger(t),
		deleted: func(n int64) { deleted += n }, batch: 10, delay: delay,
		sleep: func(ctx context.Context, d time.Duration) bool {
			pauses = append(pauses, d)
			return ctx.Err() == nil
		}}
	if total := r.walk(ctx, false, store.RetentionCursor{}, time.Now().Add(-r.age), nil); total != 300 {
		t.Fatalf("walk deleted %d, want all 300 (a tail under 20 ms over its floor does not stop it)", total)
	}
	for i, d := range pauses {
		if d < retentionPause {
			t.Fatalf("pause %d: %s, want at least the base pace's %s while the tail is past one and a half times its floor (all: %v)", i+1, d, retentionPause, pauses)
		}
	}
}

// TestRetention_BacksOffWhileStreamedEventsReachKafkaLater walks 30 old
// SENT events, 10 a batch, while the stream's events, 2 ms from commit to
// Kafka for minutes, have just taken 80 ms: it deletes nothing and its waits
// double; once they are back at 2 ms it deletes them all.
func TestRetention_BacksOffWhileStreamedEventsReachKafkaLater(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := withSentEvents(t, 30, "10 days")
	delay := &streamDelay{}
	now := time.Now()
	feed(delay, now.Add(-4*time.Minute), now.Add(-3*time.Second), 2*time.Millisecond)
	feed(delay, now.Add(-2900*time.Millisecond), now, 80*time.Millisecond)

	var deleted int64
	var waits []time.Duration
	r := &retainer{store: store.New(pool), age: 7 * 24 * time.Hour, log: zaptest.NewLogger(t),
		deleted: func(n int64) { deleted += n }, batch: 10, delay: delay,
		sleep: func(ctx context.Context, d time.Duration) bool {
			if len(waits) < 3 && deleted > 0 {
				t.Errorf("deleted %d while streamed events took 80 ms against 2 ms", deleted)
			}
			if waits = append(waits, d); len(waits) == 3 {
				at := time.Now()
				feed(delay, at, at.Add(5*time.Second), 2*time.Millisecond) // the stream is at ease again
			}
			return ctx.Err() == nil
		}}
	total := r.walk(ctx, false, store.RetentionCursor{}, time.Now().Add(-r.age), nil)
	if want := []time.Duration{retentionBackoff, 2 * retentionBackoff, 4 * retentionBackoff}; len(waits) < 3 || fmt.Sprint(waits[:3]) != fmt.Sprint(want) {
		t.Errorf("waits: %v, want %v first: nothing deleted, each wait doubled", waits, want)
	}
	if total != 30 {
		t.Errorf("walk deleted %d, want all 30 once the stream was at ease", total)
	}
}

// TestRetention_WalksOnAtTheStreamsPaceOnceStrainHasLastedTooLong: a writer
// who sends slow events most seconds keeps the stream's slowest events 80
// ms against a usual 2 ms (or the status statements 50 ms against 1 ms),
// and retention, which waited out such strain however long it lasted,
// never deleted again: the outbox grew without end. Now (strainMax shrunk
// to 300 ms here, 5 minutes in the relay) it waits that long, deleting
// nothing, then walks on while the strain goes on, each batch and its pause
// taking at least the period that keeps up with the stream (100 events a
// second: 80 ms for 10), and deletes every event. With slow status
// statements and a stream whose events are on time, the period is held from
// the strain alone (it was lost after a back-off: no warm tail restored it).
func TestRetention_WalksOnAtTheStreamsPaceOnceStrainHasLastedTooLong(t *testing.T) {
	for _, by := range []string{"slow streamed events", "slow status statements"} {
		t.Run(by, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			pool := withSentEvents(t, 300, "10 days")
			delay, status := &streamDelay{}, &statusLatency{}
			late := 2 * time.Millisecond
			if by == "slow streamed events" {
				late = 80 * time.Millisecond
			} else {
				for range 50 {
					status.observe(time.Millisecond)
				}
				for range 20 {
					status.observe(50 * time.Millisecond)
				}
			}
			now := time.Now()
			feedEvents(delay, now.Add(-4*time.Minute), now.Add(-3*time.Second), 2*time.Millisecond, 10)
			fed := streamOn(delay, now.Add(-3*time.Second), now, late, 10)
			const strainMax = 300 * time.Millisecond
			var deleted int64
			type step struct{ pause, batch time.Duration }
			var steps []step
			start, woke := time.Now(), time.Now()
			r := &retainer{store: store.New(pool), age: 7 * 24 * time.Hour, log: zaptest.NewLogger(t), batch: 10, delay: delay,
				status: status, strainMax: strainMax, deleted: func(n int64) { deleted += n },
				sleep: func(ctx context.Context, d time.Duration) bool {
					if deleted > 0 && len(steps) == 0 && time.Since(start) < strainMax {
						t.Errorf("deleted %d %s into a strain, want nothing before %s", deleted, time.Since(start), strainMax)
					}
					if deleted > 0 {
						steps = append(steps, step{d, time.Since(woke)})
					}
					time.Sleep(min(d, 20*time.Millisecond)) // the strain lasts in real time; the pauses need not
					fed = streamOn(delay, fed, time.Now(), late, 10)
					woke = time.Now()
					return ctx.Err() == nil
				}}
			if total := r.walk(ctx, false, store.RetentionCursor{}, time.Now().Add(-r.age), nil); total != 300 {
				t.Fatalf("walk deleted %d in 10 s of strain, want all 300 once it had lasted %s", total, strainMax)
			}
			period := keepUpPeriod(10, 100, time.Hour)
			for i, s := range steps {
				if s.pause+s.batch < period {
					t.Fatalf("batch %d walked on strained: took %s and paused %s, want at least the %s that keeps up with the stream (all: %v)", i+1, s.batch, s.pause, period, steps)
				}
			}
		})
	}
}

// TestRetention_StrainCountsUntilAMinuteClearAndNotThroughASlotBehind: slow
// events in most seconds leave some seconds clear, and a count of strain
// that began again at each clear reading (as the first version did) never
// reached its 5 minutes; the count goes on through clear readings until a
// minute has passed without strain. A slot behind, or a stream whose usual
// delay is not known, is waited out however long it lasts and does not
// count (a Kafka outage of 20 minutes would otherwise have it walk on the
// moment the stream came back late); nor does a strain seen before this
// relay lost the retention lock.
func TestRetention_StrainCountsUntilAMinuteClearAndNotThroughASlotBehind(t *testing.T) {
	r := &retainer{log: zaptest.NewLogger(t)}
	t0 := time.Now()
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	for i := 0; i < 300; i += 10 { // strained 9 seconds of 10 for 5 minutes
		if r.strained(at(time.Duration(i)*time.Second), delayLate) {
			t.Fatalf("walking on %d s into the strain, want only after %s", i, retentionStrainMax)
		}
		r.strained(at(time.Duration(i+9)*time.Second), "")
	}
	if !r.strained(at(retentionStrainMax), "the status statements are slower") {
		t.Fatalf("strained 9 seconds of 10 for %s: not walking on, want walking on (a clear second must not start the count again)", retentionStrainMax)
	}
	r.strained(at(retentionStrainMax+59*time.Second), "")
	if !r.strained(at(retentionStrainMax+60*time.Second), delayLate) {
		t.Errorf("strained again 59 s after the last strain: not walking on, want walking on")
	}
	r.strained(at(retentionStrainMax+121*time.Second), "")
	if r.strained(at(retentionStrainMax+122*time.Second), delayLate) {
		t.Errorf("strained again after a minute clear: walking on, want the count begun again")
	}
	r.strained(at(0), slotBehind) // a slot behind ends the count
	for _, d := range []time.Duration{0, 20 * time.Minute} {
		if r.strained(at(d), slotBehind) {
			t.Fatalf("a slot behind for %s: walking on, want it waited out", d)
		}
	}
	if r.strained(at(20*time.Minute+time.Second), delayLate) {
		t.Errorf("late events a second after a slot behind for 20 minutes: walking on, want the count begun")
	}
	r.strained(at(30*time.Minute), delayLate)
	r.release()
	if r.strained(at(30*time.Minute+time.Second), delayLate) {
		t.Errorf("strained after the relay let go of the retention lock: walking on, want the count begun again")
	}
}

// TestRetention_WaitsUntilTheStreamsUsualDelayIsKnown: a relay just
// started, its stream busy for 3 s (no floor yet): retention deletes
// nothing and looks again every second (a doubling back-off waited 12.7 s
// for a floor 10 s away); once the stream has had 10 quiet seconds it
// deletes.
func TestRetention_WaitsUntilTheStreamsUsualDelayIsKnown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := withSentEvents(t, 30, "10 days")
	delay := &streamDelay{}
	now := time.Now()
	feed(delay, now.Add(-3*time.Second), now, 2*time.Millisecond)
	var deleted int64
	var waits int
	r := &retainer{store: store.New(pool), age: 7 * 24 * time.Hour, log: zaptest.NewLogger(t),
		deleted: func(n int64) { deleted += n }, batch: 10, delay: delay,
		sleep: func(ctx context.Context, d time.Duration) bool {
			if waits < 2 && d != time.Second {
				t.Errorf("wait %d for the stream's usual delay: %s, want 1s (a look every second, not a back-off that doubles)", waits+1, d)
			}
			if waits++; waits == 2 {
				if deleted > 0 {
					t.Errorf("deleted %d before the stream's usual delay was known", deleted)
				}
				at := time.Now()
				feed(delay, at, at.Add(12*time.Second), 2*time.Millisecond)
			}
			return ctx.Err() == nil
		}}
	if total := r.walk(ctx, false, store.RetentionCursor{}, time.Now().Add(-r.age), nil); total != 30 || waits < 2 {
		t.Errorf("walk deleted %d after %d waits, want all 30 after waiting for a floor", total, waits)
	}
}

// TestRetention_APassGoesOnFromWhereTheLastEnded runs three passes of
// retention, each by a new retainer (as after a restart), over an old FAILED
// event and 200 SENT events created after it. The first deletes the 200 and
// keeps the FAILED one. Once that one is sent (a resend) and 50 more old SENT
// events are there, the second pass deletes the 50 but walks on from where
// the first ended, not over the 200 rows it deleted (which stay in the
// created_at index, dead, until a vacuum: a walk from the oldest after
// 500,000 deletes took a statement of 162 ms), so the event sent since stays.
// Once the last walk from the oldest event began an hour ago, the next pass
// walks from the oldest again and deletes it.
func TestRetention_APassGoesOnFromWhereTheLastEnded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := pgtest.Migrated(t)
	exec := func(sql string) { t.Helper(); pgtest.Exec(t, pool, sql) }
	old := func(n int, status, ago string) {
		t.Helper()
		exec(fmt.Sprintf(`WITH ev AS (INSERT INTO outbox.events (topic, payload, created_at)
			SELECT 'orders', '{}', now() - interval '%s' + i * interval '1 second' FROM generate_series(1, %d) i RETURNING id)
			INSERT INTO outbox.deliveries (event_id, status, attempts) SELECT id, '%s', 1 FROM ev`, ago, n, status))
	}
	old(1, "FAILED", "10 days")
	old(200, "SENT", "9 days")
	pass := func() {
		t.Helper()
		r := &retainer{store: store.New(pool), age: 7 * 24 * time.Hour, log: zaptest.NewLogger(t),
			deleted: func(int64) {}, batch: 10,
			sleep: func(ctx context.Context, _ time.Duration) bool { return ctx.Err() == nil }}
		r.pass(ctx)
	}
	left := func() int { return pgtest.Count(t, pool, `SELECT count(*) FROM outbox.events`) }

	pass()
	if n := left(); n != 1 {
		t.Fatalf("after the first pass %d events are left, want the FAILED one", n)
	}
	exec(`UPDATE outbox.deliveries SET status = 'SENT'`) // resent since
	old(50, "SENT", "8 days")
	pass()
	if n := left(); n != 1 {
		t.Fatalf("after the second pass %d events are left, want 1: the 50 created after where the first pass ended deleted, the one sent since before it not walked again", n)
	}
	exec(`UPDATE outbox.retention_progress SET full_walk_at = full_walk_at - interval '1 hour'`)
	pass()
	if n := left(); n != 0 {
		t.Fatalf("after a pass an hour after the last walk from the oldest event, %d events are left, want none", n)
	}
}

// TestRetention_AWalkCutShortRecordsWhereItGotTo stops a walk over 100 old
// SENT events after three batches of 10 (the relay stopping): where it got
// to is recorded, the created_at of the 30th, so that the next pass goes
// on from there.
func TestRetention_AWalkCutShortRecordsWhereItGotTo(t *testing.T) {
	t.Parallel()
	pool := withSentEvents(t, 100, "10 days")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	batches := 0
	r := &retainer{store: store.New(pool), age: 7 * 24 * time.Hour, log: zaptest.NewLogger(t),
		deleted: func(int64) {}, batch: 10,
		sleep: func(ctx context.Context, _ time.Duration) bool {
			if batches++; batches == 3 {
				cancel()
			}
			return ctx.Err() == nil
		}}
	r.pass(ctx)
	var got, want time.Time
	if err := pool.QueryRow(context.Background(), `SELECT walked_to FROM outbox.retention_progress WHERE walk = 'events'`).Scan(&got); err != nil {
		t.Fatalf("reading where the walk got to: %v", err)
	}
	if err := pool.QueryRow(context.Background(), `SELECT min(created_at) FROM outbox.events`).Scan(&want); err != nil {
		t.Fatal(err)
	}
	if left := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.events`); left != 70 || !got.Equal(want.Add(-time.Second)) {
		t.Errorf("a walk stopped after 3 batches of 10: %d events left, walked to %s; want 70 left and walked to the 30th event's created_at, %s", left, got, want.Add(-time.Second))
	}
}

// TestRetention_SaysWhenItLeadsThatWALCompressionWouldShrinkItsWAL takes
// the retention lock on a server whose wal_compression is off: as a role
// that may set it for its own transactions (a superuser; a relay's, which
// migrate lets on PostgreSQL 15 and newer) it compresses its own WAL and
// says so; as one that may not, it says what compression would save; on a
// session where it is on, it says neither.
func TestRetention_SaysWhenItLeadsThatWALCompressionWouldShrinkItsWAL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u, pool := pgtest.Migrated(t)
	pgtest.LoginRoles(t, u)
	var setting string
	if err := pool.QueryRow(ctx, `SHOW wal_compression`).Scan(&setting); err != nil {
		t.Fatal(err)
	}
	if setting != "off" {
		t.Skipf("the test server's wal_compression is %s, not off", setting)
	}
	compressed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	q := compressed.Query()
	q.Set("options", "-c wal_compression=on")                        // a superuser's session setting; "on" (pglz) in every major
	compressed.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // libpq reads no "+" as a space

	const compresses = "retention: compresses the WAL of its own deletes (wal_compression for its own transactions; the server's is off)"
	relayMay := pgtest.Major(t) >= 15
	for _, c := range []struct {
		name, url      string
		hint, compress bool
	}{
		{"a superuser", u, false, true},
		{"a relay's role", pgtest.RelayURL(u), !relayMay, relayMay},
		{"a writer's role", pgtest.WriterURL(u), true, false},
		{"a session with wal_compression on", compressed.String(), false, false},
	} {
		core, logs := observer.New(zap.InfoLevel)
		r := &retainer{dbURL: c.url, timeout: 5 * time.Second, store: store.New(pool), age: time.Hour, log: zap.New(core)}
		if !r.lead(ctx) {
			t.Fatalf("%s: did not take the free retention lock", c.name)
		}
		r.release()
		if got := logs.FilterMessage(walCompressionHint).Len(); (got == 1) != c.hint {
			t.Errorf("%s: the hint logged %d times, want it: %v", c.name, got, c.hint)
		}
		if got := logs.FilterMessage(compresses).Len(); (got == 1) != c.compress || (r.compress != "") != c.compress {
			t.Errorf("%s: said it compresses %d times, compresses with %q; want it to: %v", c.name, got, r.compress, c.compress)
		}
	}
}

// TestRetention_WalksOnWithTheServersWALCompressionOnceItMayNoLongerSetItsOwn:
// a DBA who takes SET on wal_compression back from outbox_relay while a
// relay leads retention must not stop it: its next step is refused
// (SQLSTATE 42501), and it says so once and walks on without compressing.
func TestRetention_WalksOnWithTheServersWALCompressionOnceItMayNoLongerSetItsOwn(t *testing.T) {
	t.Parallel()
	if pgtest.Major(t) < 15 {
		t.Skip("PostgreSQL 14 grants no SET on a parameter")
	}
	ctx := context.Background()
	dbURL := pgtest.Cluster(t, nil, "wal_compression=off") // its own: the grant taken back is the cluster's
	pgtest.Migrate(t, dbURL)
	pgtest.LoginRoles(t, dbURL)
	admin := pgtest.Pool(t, dbURL)
	pgtest.Exec(t, admin, `WITH ev AS (INSERT INTO outbox.events (topic, payload, created_at)
		SELECT 'orders', '{}', now() - interval '10 days' + i * interval '1 second' FROM generate_series(1, 50) i RETURNING id)
		INSERT INTO outbox.deliveries (event_id, status, attempts) SELECT id, 'SENT', 1 FROM ev`)
	pool := pgtest.Pool(t, pgtest.RelayURL(dbURL))
	core, logs := observer.New(zap.InfoLevel)
	r := &retainer{dbURL: pgtest.RelayURL(dbURL), timeout: 5 * time.Second, store: store.New(pool), age: 7 * 24 * time.Hour,
		log: zap.New(core), batch: 10, deleted: func(int64) {}, sleep: func(context.Context, time.Duration) bool { return true }}
	if !r.lead(ctx) || r.compress == "" {
		t.Fatalf("led %v, compressing with %q: want a relay's role to compress its own WAL", r.lock != nil, r.compress)
	}
	defer r.release()
	pgtest.Exec(t, admin, `REVOKE SET ON PARAMETER wal_compression FROM outbox_relay`)
	r.pass(ctx)
	if left := pgtest.Count(t, admin, `SELECT count(*) FROM outbox.events`); left != 0 {
		t.Errorf("%d of 50 old SENT events left after a pass; logs: %v", left, logs.All())
	}
	if n := logs.FilterMessageSnippet("may no longer set wal_compression").Len(); n != 1 || r.compress != "" {
		t.Errorf("said it may no longer compress %d times, compresses with %q; want once, and not", n, r.compress)
	}
}

// TestRetention_SaysWhoHoldsItsLockWhenThatIsNotARelay: an advisory lock
// takes no privilege, so a writer of outbox.events can hold retention's,
// and no relay deleted while it did, without a word. A relay that finds it
// so warns, naming the session, once and not again at each try (every
// minute); a relay that finds another relay leading says nothing.
func TestRetention_SaysWhoHoldsItsLockWhenThatIsNotARelay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u, pool := pgtest.Migrated(t)
	pgtest.LoginRoles(t, u)
	retainerAt := func() (*retainer, *observer.ObservedLogs) {
		core, logs := observer.New(zap.WarnLevel)
		return &retainer{dbURL: pgtest.RelayURL(u), timeout: 5 * time.Second, store: store.New(pool), age: time.Hour,
			log: zap.New(core)}, logs
	}
	leader, _ := retainerAt()
	if !leader.lead(ctx) {
		t.Fatal("did not take the free retention lock")
	}
	if n := pgtest.Count(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND application_name = 'outbox-relay retention'`,
		leader.lock.PgConn().PID()); n != 1 {
		t.Errorf("the leader's connection is not named in pg_stat_activity")
	}
	follower, logs := retainerAt()
	if follower.lead(ctx) || logs.Len() != 0 {
		t.Fatalf("with a relay leading: led, or said %v", logs.All())
	}
	leader.release()

	intruder, err := pgx.Connect(ctx, pgtest.WriterURL(u))
	if err != nil {
		t.Fatal(err)
	}
	defer intruder.Close(ctx)
	if _, err := intruder.Exec(ctx, `SET application_name = E'writer\x1b[31m'`); err != nil {
		t.Fatal(err)
	}
	if _, err := intruder.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended('outbox-relay/retention', 0))`); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if follower.lead(ctx) {
			t.Fatal("took the lock the writer holds")
		}
	}
	said := logs.FilterMessageSnippet("a session that is not a relay's holds retention's lock").All()
	if len(said) != 1 {
		t.Fatalf("said %d times, want once: %v", len(said), logs.All())
	}
	f := said[0].ContextMap()
	if f["pid"] != int32(intruder.PgConn().PID()) || f["user"] != "outbox_test_intruder" || strings.ContainsRune(fmt.Sprint(f["application_name"]), 0x1b) {
		t.Errorf("the warning's fields %v: want the writer's pid and role, its application_name escaped", f)
	}
}

// oneInstant writes, in one statement, n events created at one instant ten
// days ago (as one transaction's events are: now() is its start), the
// first failed of them FAILED and the rest SENT, each with its status row;
// with mapped, the status rows of mapped events instead (no copy, no
// event). The rows' places in the table follow i.
func oneInstant(t *testing.T, pool *pgxpool.Pool, mapped bool, n, failed int) {
	t.Helper()
	status := fmt.Sprintf(`CASE WHEN i <= %d THEN 'FAILED' ELSE 'SENT' END`, failed)
	sql := fmt.Sprintf(`WITH ev AS (INSERT INTO outbox.events (topic, payload, created_at)
		SELECT 'orders', jsonb_build_object('i', i), date_trunc('second', now()) - interval '10 days'
		FROM generate_series(1, %d) i RETURNING id, (payload->>'i')::int AS i)
		INSERT INTO outbox.deliveries (event_id, status, attempts) SELECT id, %s, 1 FROM ev ORDER BY i`, n, status)
	if mapped {
		sql = fmt.Sprintf(`INSERT INTO outbox.deliveries (event_id, status, attempts, next_attempt_at, source, topic, created_at)
			SELECT outbox.event_id('public.outboxevent', i::text), %s, 1, now(), 'public.outboxevent', 'orders',
			       date_trunc('second', now()) - interval '10 days'
			FROM generate_series(1, %d) i`, status, n)
	}
	pgtest.Exec(t, pool, sql)
}

// retainerOf walks pool 10 events a batch, without pauses, calling stop
// (if not nil) after each batch: true ends the walk.
func retainerOf(t *testing.T, pool *pgxpool.Pool, stop func() bool) *retainer {
	return &retainer{store: store.New(pool), age: 7 * 24 * time.Hour, log: zaptest.NewLogger(t),
		deleted: func(int64) {}, batch: 10,
		sleep: func(ctx context.Context, _ time.Duration) bool {
			return ctx.Err() == nil && (stop == nil || !stop())
		}}
}

// TestRetention_DeletesEveryEventOfATransactionOfManyBatches walks one
// transaction's 250 SENT events, all created at one instant, 10 a batch:
// it deletes all of them. A walk whose cursor was created_at alone stepped
// a microsecond past the instant once a whole batch of it was walked, and
// left 230 of them for ever (a walk from the oldest, every hour, took 20
// more).
func TestRetention_DeletesEveryEventOfATransactionOfManyBatches(t *testing.T) {
	t.Parallel()
	for _, mapped := range []bool{false, true} {
		t.Run(map[bool]string{false: "events", true: "mapped"}[mapped], func(t *testing.T) {
			t.Parallel()
			_, pool := pgtest.Migrated(t)
			oneInstant(t, pool, mapped, 250, 0)
			if n := retainerOf(t, pool, nil).walk(context.Background(), mapped, store.RetentionCursor{}, time.Now().Add(-7*24*time.Hour), nil); n != 250 {
				t.Fatalf("walk deleted %d of one transaction's 250 SENT events, want all", n)
			}
			if n := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.deliveries`); n != 0 {
				t.Fatalf("%d status rows left, want none", n)
			}
		})
	}
}

// TestRetention_WalksPastTheFAILEDEventsOfOneInstant walks one
// transaction's 250 events, the first 25 FAILED, the rest SENT, 10 a
// batch, twice: the first walk stops after 2 batches, having walked 20 of
// the FAILED ones, and records that (walked_past); the next pass goes on
// past them and deletes the 225 SENT ones. A walk that stepped past the
// instant after a batch of 10 FAILED events of it deleted none.
func TestRetention_WalksPastTheFAILEDEventsOfOneInstant(t *testing.T) {
	t.Parallel()
	for _, mapped := range []bool{false, true} {
		t.Run(map[bool]string{false: "events", true: "mapped"}[mapped], func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			_, pool := pgtest.Migrated(t)
			oneInstant(t, pool, mapped, 250, 25)
			batches := 0
			retainerOf(t, pool, func() bool { batches++; return batches == 2 }).pass(ctx)
			var past int64
			if err := pool.QueryRow(ctx, `SELECT walked_past FROM outbox.retention_progress WHERE walk = $1`,
				map[bool]string{false: "events", true: "mapped"}[mapped]).Scan(&past); err != nil || past != 20 {
				t.Fatalf("after a walk of 2 batches of 10 FAILED events: walked_past %d (%v), want 20", past, err)
			}
			retainerOf(t, pool, nil).pass(ctx)
			if n := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.deliveries WHERE status = 'SENT'`); n != 0 {
				t.Fatalf("%d SENT status rows left of one transaction's 225, want none", n)
			}
			if n := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.deliveries WHERE status = 'FAILED'`); n != 25 {
				t.Fatalf("%d FAILED status rows left, want the 25", n)
			}
		})
	}
}

// TestRetention_StepsPastAnInstantOfMoreKeptEventsThanItWalksThrough walks
// one transaction's 80 events, the first 50 FAILED, then 5 SENT events of
// later instants, 10 a batch, with at most 30 kept events of one instant
// walked through: each step reads the kept ones again, and a writer's
// million failing events in one transaction would hold every walk there.
// It steps past the instant once it has walked past 30, saying so, and
// deletes the 5 later events; the instant's 30 SENT events stay (purge
// deletes them).
func TestRetention_StepsPastAnInstantOfMoreKeptEventsThanItWalksThrough(t *testing.T) {
	t.Parallel()
	_, pool := pgtest.Migrated(t)
	oneInstant(t, pool, false, 80, 50)
	pgtest.Exec(t, pool, `WITH ev AS (INSERT INTO outbox.events (topic, payload, created_at)
		SELECT 'orders', '{}', date_trunc('second', now()) - interval '9 days' + i * interval '1 second' FROM generate_series(1, 5) i RETURNING id)
		INSERT INTO outbox.deliveries (event_id, status, attempts) SELECT id, 'SENT', 1 FROM ev`)
	core, logs := observer.New(zap.WarnLevel)
	r := retainerOf(t, pool, nil)
	r.log, r.pastMax = zap.New(core), 30
	if n := r.walk(context.Background(), false, store.RetentionCursor{}, time.Now().Add(-7*24*time.Hour), nil); n != 5 {
		t.Fatalf("walk deleted %d, want the 5 events after the instant", n)
	}
	if n := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.deliveries WHERE status = 'SENT'`); n != 30 {
		t.Fatalf("%d SENT status rows left, want the instant's 30", n)
	}
	if w := logs.FilterMessageSnippet("stepping past an instant").All(); len(w) != 1 || w[0].ContextMap()["kept"] != int64(40) {
		t.Fatalf("warnings: %v; want one, of 40 kept", logs.All())
	}
}

// TestRetention_ReleasingItsLockFreesItBeforeReturning: a relay that gives
// retention up (its lock connection broken, or shutting down) must leave
// the lock free when release returns, for the next relay to take at once.
// Closing the connection alone left it to the server's backend to let go
// after exiting, and a try just after could find it still held (one run
// in 300 of the wal_compression test under load did).
func TestRetention_ReleasingItsLockFreesItBeforeReturning(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u, pool := pgtest.Migrated(t)
	r := &retainer{dbURL: u, timeout: 5 * time.Second, store: store.New(pool), age: time.Hour, log: zap.NewNop()}
	for i := range 200 {
		if !r.lead(ctx) {
			t.Fatalf("try %d: did not take the free retention lock", i)
		}
		r.release()
		if held := pgtest.Count(t, pool, `SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
			WHERE l.locktype = 'advisory' AND l.granted AND d.datname = current_database()`); held != 0 {
			t.Fatalf("try %d: just after release, %d advisory locks are still held", i, held)
		}
	}
}
