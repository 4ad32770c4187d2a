package relay

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"go.uber.org/zap"

	"github.com/outbox-relay/outbox-relay/cdc"
)

// batch is a run of consecutive events travelling the pipeline together.
type batch struct {
	events   []event
	bytes    int
	lastSeq  uint64
	replayed bool         // holds events that may already have a status row
	pending  atomic.Int32 // outcomes still to come, +1 while being fed
	done     chan struct{}
}

// seal links every event to its batch and its message to the event, once
// the events slice no longer grows.
func (b *batch) seal() {
	for i := range b.events {
		e := &b.events[i]
		e.batch = b
		e.msg.Metadata = e
	}
}

func (b *batch) complete() {
	if b.pending.Add(-1) == 0 {
		close(b.done)
	}
}

// session is one replication connection's worth of relaying. Stages, each
// one goroutine, in order:
//
//	Receive (cdc) → consume: decode rows, cut batches, bound the window
//	             → produce:  skip rows that have a status, hand the rest to Kafka
//	             → write:    one status statement per group of finished batches
//	                         (lingering StatusLinger for more), in order,
//	                         committed without waiting for the flush
//	             → flushed:  one synchronous barrier commit for all written so
//	                         far, at most every barrierEvery; then the tracker
//	                         may confirm the slot.
type session struct {
	r      *Relay
	tr     *tracker
	win    *window
	hard   context.Context // ends only when the graceful drain gives up
	pgDown *outage

	seq        uint64
	commitTime time.Time
	// replayUntil and replaying: events of transactions committed at or
	// before replayUntil may have a status row from an earlier session, and
	// are looked up before they are published; later ones cannot.
	replayUntil pglogrepl.LSN
	replaying   bool
	ceiling     statusCeiling // which replayed events need the look-up
	cur         *batch
	layouts     map[*cdc.Relation]*layout

	toProduce chan *batch
	toWrite   chan *batch
	toFlush   chan uint64 // last seq of each written status group, in order
	produced  chan struct{}
	written   chan struct{}
	durable   chan struct{}
}

func (r *Relay) session(ctx context.Context, streamOutage *outage) error {
	// Read before streaming starts: every status row written by an earlier
	// session of this process is committed by now.
	ceiling, err := readStatusCeiling(ctx, r.pool, r.cfg.Poll.GapGrace)
	if err != nil {
		return err
	}
	stream, err := cdc.Open(ctx, cdc.Config{
		DatabaseURL: r.cfg.DatabaseURL, Slot: r.cfg.Slot, Publication: r.cfg.Publication,
		StatusInterval: r.cfg.StatusInterval,
	})
	if err != nil {
		return err
	}
	streamOutage.ok()
	r.log.Info("streaming", zap.String("slot", r.cfg.Slot), zap.Stringer("lsn", stream.StartLSN()))

	hard, giveUp := context.WithCancel(context.WithoutCancel(ctx))
	defer giveUp()
	stopDrainTimer := context.AfterFunc(ctx, func() {
		time.AfterFunc(r.cfg.ShutdownTimeout, giveUp)
	})
	defer stopDrainTimer()

	s := &session{
		r: r, tr: newTracker(stream.StartLSN()), win: newWindow(r.cfg.MaxInFlight, r.cfg.MaxInFlightBytes),
		replayUntil: stream.ReplayUntil(), ceiling: ceiling,
		hard: hard, pgDown: newOutage(r.log, "postgres"),
		layouts:   map[*cdc.Relation]*layout{},
		toProduce: make(chan *batch, r.cfg.MaxInFlight),
		toWrite:   make(chan *batch, r.cfg.MaxInFlight),
		toFlush:   make(chan uint64, r.cfg.MaxInFlight),
		produced:  make(chan struct{}),
		written:   make(chan struct{}),
		durable:   make(chan struct{}),
	}
	readCtx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	changes := make(chan cdc.Change, min(r.cfg.BatchSize, 4096))
	recvErr := make(chan error, 1)
	go func() {
		defer close(changes)
		recvErr <- stream.Receive(readCtx, changes, s.tr)
	}()
	go s.produce()
	go s.write()
	go s.flushed()

	consumeErr := s.consume(changes)
	if consumeErr != nil {
		stopReading()
		for range changes { //nolint:revive // let Receive return
		}
	}
	s.flush()
	close(s.toProduce)
	close(s.toWrite)
	<-s.produced
	<-s.written
	close(s.toFlush)
	<-s.durable
	err = errors.Join(consumeErr, <-recvErr)
	if hard.Err() != nil {
		r.log.Warn("shutdown timeout: gave up on events still in flight; they will be replayed",
			zap.Duration("shutdown_timeout", r.cfg.ShutdownTimeout))
	}
	if cerr := stream.Close(ctx, s.tr); cerr != nil && err == nil && ctx.Err() == nil {
		err = cerr
	}
	r.log.Info("stream stopped", zap.Stringer("confirmed_lsn", s.tr.Confirmed()))
	return err
}

// consume turns changes into batches until the stream ends.
func (s *session) consume(changes <-chan cdc.Change) error {
	for {
		var ch cdc.Change
		var ok bool
		select {
		case ch, ok = <-changes:
		default:
			s.flush() // nothing else waiting: send what we have now
			ch, ok = <-changes
		}
		if !ok {
			return nil
		}
		switch ch.Kind {
		case cdc.KindBegin:
			s.commitTime = ch.Time
			s.replaying = ch.LSN <= s.replayUntil
		case cdc.KindInsert:
			if err := s.add(ch); err != nil {
				return err
			}
		case cdc.KindCommit:
			s.tr.commit(s.seq, ch.LSN)
		}
	}
}

func (s *session) add(ch cdc.Change) error {
	l := s.layouts[ch.Relation]
	if l == nil {
		var err error
		if l, err = newLayout(ch.Relation); err != nil {
			return err
		}
		s.layouts[ch.Relation] = l
	}
	if s.cur == nil {
		s.cur = &batch{events: make([]event, 0, 8), done: make(chan struct{})}
	}
	s.seq++
	b := s.cur
	b.events = append(b.events, event{seq: s.seq}) // linked to b at seal
	b.replayed = b.replayed || s.replaying
	e := &b.events[len(b.events)-1]
	l.fill(e, ch.Values, s.commitTime)
	b.bytes += max(e.size, 64)
	if len(b.events) >= s.r.cfg.BatchSize || b.bytes >= s.r.cfg.MaxInFlightBytes/4 {
		s.flush()
	}
	return nil
}

// flush ships the current batch once the window has room for it.
func (s *session) flush() {
	b := s.cur
	if b == nil || len(b.events) == 0 {
		return
	}
	s.cur = nil
	b.seal()
	b.lastSeq = s.seq
	s.win.acquire(len(b.events), b.bytes)
	b.pending.Store(int32(len(b.events)) + 1)
	s.toWrite <- b
	s.toProduce <- b
}

// produce skips events that already have a status row, records invalid ones
// and hands the rest to Kafka, in order.
func (s *session) produce() {
	defer close(s.produced)
	ids := make([][16]byte, 0, s.r.cfg.BatchSize)
	for b := range s.toProduce {
		var err error
		if b.replayed {
			err = retryDB(s.hard, s.pgDown, func(ctx context.Context) error {
				return markExisting(ctx, s.r.pool, s.ceiling, b, ids)
			})
		}
		if err == nil { // otherwise giving up: the outcomes will never be written
			_ = s.r.publishBatch(s.hard, b)
		}
		b.complete()
	}
}

// missingEventPatience is how long status rows wait for their events to
// become visible before the relay concludes they were deleted.
const missingEventPatience = 10 * time.Second

// writeStatuses writes rows, retrying while PostgreSQL is unreachable. A
// walsender sends a commit once it is in the WAL, a moment before other
// sessions can see it, so an event can briefly be invisible and its row left
// out: the statement is run again (rows already written are left alone)
// until every event is seen. One still missing after missingEventPatience
// was deleted; its status is dropped rather than blocking the stream.
func (s *session) writeStatuses(rows *statusRows) error {
	deadline := time.Now().Add(missingEventPatience)
	return retryDB(s.hard, s.pgDown, func(ctx context.Context) error {
		wait := time.Millisecond
		for {
			visible, err := rows.write(ctx, s.r.statusPool)
			if err != nil || visible == len(rows.ids) {
				return err
			}
			if time.Now().After(deadline) {
				s.r.log.Warn("events were deleted before their delivery status could be recorded; statuses written for the rest",
					zap.Int("batch", len(rows.ids)), zap.Int("deleted", len(rows.ids)-visible))
				return nil
			}
			if !sleep(ctx, wait) {
				return ctx.Err()
			}
			wait = min(2*wait, 50*time.Millisecond)
		}
	})
}

// write records outcomes in order, one statement for as many finished
// batches as fit in BatchSize rows and finish within StatusLinger of the
// first, then lets the tracker advance. Lingering costs no latency (the
// events are on Kafka already) and saves statements when events come one
// transaction at a time.
func (s *session) write() {
	defer close(s.written)
	rows := &statusRows{policy: s.r.cfg.Retry.JSON()}
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	var group []*batch
	var next *batch
	for {
		b := next
		next = nil
		if b == nil {
			var ok bool
			if b, ok = <-s.toWrite; !ok {
				return
			}
		}
		select {
		case <-b.done:
		case <-s.hard.Done():
			return
		}
		group = append(group[:0], b)
		n := len(b.events)
		linger.Reset(s.r.cfg.StatusLinger)
	more:
		for n < s.r.cfg.BatchSize {
			select {
			case nb, ok := <-s.toWrite:
				if !ok {
					break more // stopping: write what is here now
				}
				select {
				case <-nb.done:
					group = append(group, nb)
					n += len(nb.events)
				case <-linger.C:
					next = nb
					break more
				case <-s.hard.Done():
					return
				}
			case <-linger.C:
				break more
			case <-s.hard.Done():
				return
			}
		}
		linger.Stop()
		rows.reset()
		for _, g := range group {
			for i := range g.events {
				if e := &g.events[i]; !e.skip {
					pol := s.r.policyFor(e.maxAttempts)
					s.r.settle(&e.res, pol, 0)
					rows.add(e, int32(pol.MaxAttempts))
				}
			}
		}
		if err := s.writeStatuses(rows); err != nil {
			return
		}
		// The rows are written: the events may leave memory. They count as
		// durable after the next barrier (flushed).
		for _, g := range group {
			s.win.release(len(g.events), g.bytes)
		}
		select {
		case s.toFlush <- group[len(group)-1].lastSeq:
		case <-s.hard.Done():
			return
		}
	}
}

// barrierEvery spaces barriers: the slot's position is reported every
// StatusInterval at most, so more frequent flushes would buy nothing.
const barrierEvery = 20 * time.Millisecond

// flushed tells the tracker about status rows once they are on disk. Status
// statements commit without waiting for their own WAL flush; this takes
// every group committed so far and runs one synchronous commit after them
// (the barrier): when it returns, the WAL is on disk past all of them. One
// flush so serves many statements, as a group commit does, and the slot
// still never moves past a status row that is not durable.
func (s *session) flushed() {
	defer close(s.durable)
	spacing := time.NewTimer(time.Hour)
	spacing.Stop()
	for last := range s.toFlush {
	more:
		for {
			select {
			case n, ok := <-s.toFlush:
				if !ok {
					break more
				}
				last = n
			default:
				break more
			}
		}
		if err := retryDB(s.hard, s.pgDown, func(ctx context.Context) error {
			_, err := s.r.pool.Exec(ctx, barrierSQL)
			return err
		}); err != nil {
			return
		}
		s.tr.madeDurable(last)
		spacing.Reset(barrierEvery)
		select {
		case <-spacing.C:
		case <-s.hard.Done():
			return
		}
	}
}
