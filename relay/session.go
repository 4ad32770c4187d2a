package relay

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/outbox-relay/outbox-relay/cdc"
	"github.com/outbox-relay/outbox-relay/internal/kafka"
	"github.com/outbox-relay/outbox-relay/internal/metrics"
	"github.com/outbox-relay/outbox-relay/internal/outage"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

// batch is a run of consecutive events travelling the pipeline together.
type batch struct {
	events   []event
	bytes    int
	lastSeq  uint64       // the session's count of events up to the last of this batch
	replayed bool         // holds events that may already have a status row
	pending  atomic.Int32 // outcomes still to come, +1 while being fed
	done     chan struct{}
}

// firstSeq is the session's number of b's first event (lastSeq is its last).
func (b *batch) firstSeq() uint64 { return b.lastSeq - uint64(len(b.events)) + 1 }

func newBatch(capacity int) *batch {
	return &batch{events: make([]event, 0, capacity), done: make(chan struct{})}
}

// Done implements kafka.Receiver: one of b's events has its outcome.
func (b *batch) Done(*kafka.Message) { b.complete() }

func (b *batch) complete() {
	if b.pending.Add(-1) == 0 {
		close(b.done)
	}
}

// loadBatch returns a batch of n events read from rows of rel's columns
// (row(i) is event i's values), with now for a table without created_at.
func loadBatch(rel *cdc.Relation, ce *ceWriter, n int, now time.Time, row func(i int) [][]byte) (*batch, error) {
	l, err := newLayout(rel, ce)
	if err != nil {
		return nil, err
	}
	b := newBatch(n)
	b.events = b.events[:n]
	for i := range b.events {
		l.fill(&b.events[i], row(i), now)
	}
	return b, nil
}

// publish hands msgs, b's messages, to pub and waits until every event of
// b has its outcome. An error, or ctx ending first, leaves some without.
func (b *batch) publish(ctx context.Context, pub *kafka.Publisher, msgs []*kafka.Message) error {
	if err := pub.Publish(ctx, msgs, b); err != nil {
		return err
	}
	b.complete()
	select {
	case <-b.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// messages returns, appended to msgs, b's events to hand to Kafka, in
// order: events that already have a status row are skipped and rows that
// cannot be messages are left to settle as INVALID_EVENT, each completing
// one of b's pending counts.
func (b *batch) messages(msgs []*kafka.Message) []*kafka.Message {
	for i := range b.events {
		e := &b.events[i]
		switch {
		case e.skip, e.deferred():
			b.complete()
		case e.invalid != "":
			b.complete() // settled, and logged, as INVALID_EVENT
		default:
			msgs = append(msgs, &e.Message)
		}
	}
	return msgs
}

// session is one replication connection's worth of relaying. Stages, each
// one goroutine, in order:
//
//	Receive (cdc) → consume: decode rows, cut batches, bound the window
//	             → produce:  skip rows that have a status, hand the rest to Kafka
//	             → write:    one status statement per group of finished batches
//	                         (lingering StatusLinger for more), in order,
//	                         committed without waiting for the WAL flush
//	             → barrier:  one synchronous commit for all written so far, at
//	                         most every barrierEvery; then the tracker may
//	                         confirm the slot.
//
// The stages after consume run in an errgroup: one that fails ends the
// session with its error.
type session struct {
	r      *Relay
	pub    *kafka.Publisher
	stream *cdc.Stream
	tr     *tracker
	win    *window
	drain  context.Context // ends when the graceful drain gives up
	hard   context.Context // ends when the drain gives up or a stage fails
	pgDown *outage.Log

	seq        uint64
	commitTime time.Time
	commitLSN  uint64 // of the transaction being read
	txPos      int32  // the next event's position in it
	// queue routes events to Kafka or to the table (spill.go); routed is
	// the produce stage's count of events up to the last batch it routed,
	// written the write stage's up to the last one with its rows in the table.
	queue         *queue
	routed        uint64
	written       atomic.Uint64
	drainingSince time.Time // produce stage: see noteDraining
	// backfillDone: the new slot's backfill has written its last page; the
	// next refresh of the queue ends its backfilling.
	backfillDone atomic.Bool
	// replayUntil and replaying: events of transactions committed at or
	// before replayUntil may have a status row from an earlier session, and
	// are looked up before they are published; later ones cannot.
	replayUntil pglogrepl.LSN
	replaying   bool
	ceiling     statusCeiling // which replayed events need the look-up
	cur         *batch
	// lastLen is how many events the last batch shipped held: the next
	// one starts with room for as many, so that a drain's batches do not
	// grow (and copy) their events slice up to --batch-size one doubling
	// at a time.
	lastLen int
	layouts map[*cdc.Relation]filler

	readDone  chan struct{} // closed when read has shipped its last batch
	toProduce chan *batch
	toWrite   chan *batch
	toBarrier chan written // each written status group, in order
}

// written is a status group the write stage has recorded.
type written struct {
	lastSeq  uint64    // the session's count of events up to its last one
	firstAck time.Time // its earliest Kafka acknowledgement (zero: none)
}

func (r *Relay) session(ctx context.Context, pub *kafka.Publisher, streamDown *outage.Log) (err error) {
	// Read before streaming starts: every status row written by an earlier
	// session of this process is committed by now.
	ceiling, err := readStatusCeiling(ctx, r.store, r.cfg.Poll.GapGrace)
	if err != nil {
		return err
	}
	if err := r.recoverUnfinishedBackfill(ctx); err != nil {
		return err
	}
	stream, backfill, err := r.openStream(ctx, pub)
	if err != nil {
		return err
	}
	defer backfill.end()
	// However the session ends, it ends replication: a connection left open
	// would hold the slot until the walsender's timeout.
	tr := newTracker(stream.StartLSN())
	defer func() {
		if cerr := stream.Close(ctx, tr); cerr != nil && err == nil && ctx.Err() == nil {
			err = cerr
		}
		r.log.Info("stream stopped", zap.Stringer("confirmed_lsn", tr.Confirmed()))
	}()
	streamDown.Recovered()
	r.reconnecting.Store(false)
	r.setRole(metrics.RoleStreaming)
	r.log.Info("streaming: the slot is consistent and replication has started",
		zap.String("slot", r.cfg.Slot), zap.Stringer("lsn", stream.StartLSN()))

	drain, giveUp := context.WithCancel(context.WithoutCancel(ctx))
	defer giveUp()
	stopDrainTimer := context.AfterFunc(ctx, func() {
		time.AfterFunc(r.cfg.ShutdownTimeout, giveUp)
	})
	defer stopDrainTimer()
	g, hard := errgroup.WithContext(drain)
	s := &session{
		r: r, pub: pub, stream: stream, tr: tr, win: newWindow(r.cfg.MaxInFlight, r.cfg.MaxInFlightBytes),
		replayUntil: stream.ReplayUntil(), ceiling: ceiling,
		drain: drain, hard: hard, pgDown: outage.New(r.log, "postgres"),
		layouts: map[*cdc.Relation]filler{}, queue: newQueue(),
		readDone:  make(chan struct{}),
		toProduce: make(chan *batch, r.cfg.MaxInFlight),
		toWrite:   make(chan *batch, r.cfg.MaxInFlight),
		toBarrier: make(chan written, r.cfg.MaxInFlight),
	}
	if err := s.startQueue(ctx); err != nil {
		return err
	}
	r.current.Store(s)
	defer r.current.Store(nil)
	if r.spills() {
		g.Go(s.watchSpill)
	}
	if backfill.done != nil {
		// Until the backfill has written every event older than the slot,
		// the stream queues the events of the keys it will find, so that
		// none overtakes an earlier one the backfill has not reached.
		s.queue.backfill(backfill.keys, backfill.every)
		g.Go(backfill.watch(ctx, hard, func() { s.backfillDone.Store(true) }))
	}
	g.Go(s.produce)
	g.Go(s.write)
	g.Go(s.barrier)

	err = errors.Join(s.read(ctx, stream), g.Wait())
	if errors.Is(err, cdc.ErrSilent) {
		r.silent(ctx, stream, err)
	}
	if drain.Err() != nil {
		r.log.Warn("shutdown timeout: gave up on events still in flight; they will be replayed",
			zap.Duration("shutdown_timeout", r.cfg.ShutdownTimeout))
	}
	return err
}

// openStream opens the replication stream from the slot, creating the slot
// when it is missing; the returned backfill delivers what a new slot will
// not stream (end it when the session ends).
func (r *Relay) openStream(ctx context.Context, pub *kafka.Publisher) (*cdc.Stream, *slotBackfill, error) {
	cfg := cdc.Config{
		DatabaseURL: r.cfg.DatabaseURL, Slot: r.cfg.Slot, Publication: r.cfg.Publication,
		StatusInterval: r.cfg.StatusInterval, Failover: r.cfg.SlotFailover, Timeout: r.cfg.ReplicationTimeout,
	}
	for _, t := range r.cfg.mapped() {
		cfg.Tables = append(cfg.Tables, t.Ident())
	}
	if err := r.checkTables(ctx); err != nil {
		return nil, nil, err
	}
	backfill := r.hookBackfill(ctx, &cfg, pub)
	r.warnUnbackfilled(&cfg)
	stream, err := cdc.Open(ctx, cfg)
	if err != nil {
		backfill.end()
		return nil, nil, err
	}
	return stream, backfill, nil
}

// silent handles a stream that heard nothing from the server for the
// replication timeout: it says so, and ends the walsender that served it
// (through a new connection) so that the slot is free for the next session
// at once rather than after wal_sender_timeout. Events in flight are not
// confirmed: the next session reads them again (duplicates, never loss).
func (r *Relay) silent(ctx context.Context, stream *cdc.Stream, err error) {
	r.reconnecting.Store(true)
	pid := stream.BackendPID()
	r.log.Warn("the replication connection went silent: closing it and streaming again from the confirmed position",
		zap.String("slot", r.cfg.Slot), zap.Duration("silence", time.Since(stream.LastHeard()).Round(time.Millisecond)),
		zap.Duration("replication_timeout", r.cfg.ReplicationTimeout), zap.Uint32("walsender_pid", pid), zap.Error(err))
	ended, terr := r.store.EndWalsender(ctx, pid)
	switch {
	case terr != nil:
		r.log.Warn("could not end the silent connection's walsender; the slot is free once PostgreSQL notices the connection is gone",
			zap.String("slot", r.cfg.Slot), zap.Uint32("walsender_pid", pid), zap.Error(terr))
	case ended:
		r.log.Info("ended the silent connection's walsender", zap.String("slot", r.cfg.Slot), zap.Uint32("walsender_pid", pid))
	}
}

// read receives from the stream and consumes what it brings until ctx ends,
// the stream fails or a stage does, then ships the last batch and closes
// the stages' input. It returns the stream's or consume's error.
func (s *session) read(ctx context.Context, stream *cdc.Stream) error {
	readCtx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	defer context.AfterFunc(s.hard, stopReading)()
	changes := make(chan cdc.Change, min(s.r.cfg.BatchSize, 4096))
	recvErr := make(chan error, 1)
	go func() {
		defer close(changes)
		recvErr <- stream.Receive(readCtx, changes, s.tr)
	}()
	err := s.consume(changes)
	if err == nil {
		err = s.ship()
	}
	if err != nil {
		stopReading()
		for range changes { //nolint:revive // let Receive return
		}
	}
	close(s.toProduce)
	close(s.toWrite)
	close(s.readDone)
	return errors.Join(s.gaveUp(err), <-recvErr)
}

// gaveUp drops err if it only says that the drain gave up (logged once by
// session): that is a stop, not a failure.
func (s *session) gaveUp(err error) error {
	if s.drain.Err() != nil && errors.Is(err, context.Canceled) {
		return nil
	}
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
			if err := s.ship(); err != nil { // nothing else waiting: send what we have now
				return err
			}
			ch, ok = <-changes
		}
		if !ok {
			return nil
		}
		switch ch.Kind {
		case cdc.KindBegin:
			s.commitTime = ch.Time
			s.commitLSN, s.txPos = uint64(ch.LSN), 0
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
		if l, err = s.r.layoutFor(ch.Relation); err != nil {
			return err
		}
		s.layouts[ch.Relation] = l
	}
	if s.cur == nil {
		s.cur = newBatch(max(s.lastLen, 8))
	}
	s.seq++
	b := s.cur
	b.events = append(b.events, event{})
	b.replayed = b.replayed || s.replaying
	e := &b.events[len(b.events)-1]
	e.commitTime, e.commitLSN, e.txPos = s.commitTime, s.commitLSN, s.txPos
	s.txPos++
	l.fill(e, ch.Values, s.commitTime)
	b.bytes += max(e.size, 64)
	if len(b.events) >= s.r.cfg.BatchSize || b.bytes >= s.r.cfg.MaxInFlightBytes/4 {
		return s.ship()
	}
	return nil
}

// ship sends the current batch down the pipeline once the window has room
// for it.
func (s *session) ship() error {
	b := s.cur
	if b == nil || len(b.events) == 0 {
		return nil
	}
	s.cur, s.lastLen = nil, len(b.events)
	b.lastSeq = s.seq
	if err := s.win.acquire(s.hard, len(b.events), b.bytes); err != nil {
		return err
	}
	b.pending.Store(int32(len(b.events)) + 1)
	s.toWrite <- b
	s.toProduce <- b
	return nil
}

// produce skips events that already have a status row, records invalid
// ones, queues those that must wait (queue.route) and hands the rest to
// Kafka, in order. Between batches, every queueRefresh, it refreshes the
// queue (refreshQueue).
func (s *session) produce() error {
	ids := make([][16]byte, 0, s.r.cfg.BatchSize)
	var msgs []*kafka.Message
	refresh := time.NewTicker(queueRefresh)
	defer refresh.Stop()
	for {
		var b *batch
		select {
		case <-refresh.C:
			s.refreshQueue()
			continue
		case b = <-s.toProduce:
		}
		if b == nil {
			return nil
		}
		if b.replayed {
			err := outage.Retry(s.hard, s.pgDown, func(ctx context.Context) error {
				return s.ceiling.markExisting(ctx, s.r.store, b, ids)
			})
			if err != nil {
				return s.gaveUp(err)
			}
		}
		s.queue.route(b)
		s.routed = b.lastSeq
		msgs = b.messages(msgs[:0])
		if err := s.pub.Publish(s.hard, msgs, b); err != nil {
			return s.gaveUp(err)
		}
		b.complete()
	}
}

// missingEventPatience is how long status rows wait for their events to
// become visible before the relay concludes they were deleted.
const missingEventPatience = 10 * time.Second

// writeOutcomes writes rows, retrying while PostgreSQL is unreachable. A
// walsender sends a commit once it is in the WAL, a moment before other
// sessions can see it, so an event can briefly be invisible and its row left
// out: the statement is run again (rows already written are left alone)
// until every event is seen. One still missing after missingEventPatience
// was deleted; its status is dropped rather than blocking the stream.
func (s *session) writeOutcomes(rows *store.Outcomes, policy []byte) error {
	deadline := time.Now().Add(missingEventPatience)
	return outage.Retry(s.hard, s.pgDown, func(ctx context.Context) error {
		wait := time.Millisecond
		for {
			start := time.Now()
			visible, err := s.r.store.InsertOutcomes(ctx, rows, policy)
			s.r.metrics.Observe("insert_outcomes", start)
			s.r.statusTime.observe(time.Since(start))
			if err != nil || visible == rows.Len() {
				return err
			}
			if time.Now().After(deadline) {
				s.r.log.Warn("events were deleted before their delivery status could be recorded; statuses written for the rest",
					zap.Int("batch", rows.Len()), zap.Int("deleted", rows.Len()-visible))
				return nil
			}
			if !outage.Sleep(ctx, wait) {
				return ctx.Err()
			}
			wait = min(2*wait, 50*time.Millisecond)
		}
	})
}

// write records outcomes in order, one statement for each group of finished
// batches (grouper.next), then hands the group to the barrier.
func (s *session) write() error {
	defer close(s.toBarrier)
	policy := s.r.cfg.Retry.JSON()
	hold := s.r.hold()
	rows := &store.Outcomes{}
	tally := s.r.metrics.NewTally()
	g := &grouper{in: s.toWrite, hard: s.hard, max: s.r.cfg.BatchSize, linger: s.r.cfg.StatusLinger}
	for {
		group, err := g.next()
		if err != nil || group == nil {
			return s.gaveUp(err)
		}
		rows.Reset()
		var firstAck time.Time
		var slowest time.Duration // the group's largest commit-to-ack
		acked := 0                // the group's events with an outcome from Kafka
		for _, b := range group {
			first := b.firstSeq()
			for i := range b.events {
				if e := &b.events[i]; !e.skip {
					o := s.r.settle.outcome(e, 0, s.r.settle.policy(e.maxAttempts), 0)
					switch {
					case e.copy != nil && store.FirstTrySent(o):
						rows.AddMapped(o, e.copy)
					case e.copy != nil:
						rows.AddMapped(o, e.keptCopy())
					default:
						rows.Add(o)
					}
					count(tally, e, o)
					if hold && !e.deferred() && o.Status != store.StatusSent {
						s.queue.hold(e, first+uint64(i)) // waits for a retry or failed
					}
					if at := e.Outcome.At; !at.IsZero() {
						took := at.Sub(e.commitTime)
						s.r.metrics.CommitToAck.Observe(took.Seconds())
						slowest = max(slowest, took)
						acked++
						if firstAck.IsZero() || at.Before(firstAck) {
							firstAck = at
						}
					}
				}
			}
		}
		if !firstAck.IsZero() {
			s.r.streamDelay.observeGroup(time.Now(), slowest, acked)
		}
		if err := s.writeOutcomes(rows, policy); err != nil {
			return s.gaveUp(err)
		}
		s.written.Store(group[len(group)-1].lastSeq)
		tally.Flush()
		// The rows are written: the events may leave memory. They count as
		// durable after the next barrier.
		for _, b := range group {
			s.win.release(len(b.events), b.bytes)
		}
		select {
		case s.toBarrier <- written{lastSeq: group[len(group)-1].lastSeq, firstAck: firstAck}:
		case <-s.hard.Done():
			return s.gaveUp(s.hard.Err())
		}
	}
}

// barrierEvery spaces barriers: the slot's position is reported every
// StatusInterval at most, so more frequent flushes would buy nothing.
const barrierEvery = 20 * time.Millisecond

// barrier tells the tracker about status rows once they are on disk. Status
// statements commit without waiting for their own WAL flush; this takes
// every group written so far and runs one synchronous commit after them:
// when it returns, the WAL is on disk past all of them. One flush so serves
// many statements, as a group commit does, and the slot still never moves
// past a status row that is not durable.
func (s *session) barrier() error {
	spacing := time.NewTimer(time.Hour)
	spacing.Stop()
	for last := range s.toBarrier {
		firstAck := last.firstAck
	more:
		for {
			select {
			case w, ok := <-s.toBarrier:
				if !ok {
					break more
				}
				last = w
				if firstAck.IsZero() {
					firstAck = w.firstAck
				}
			default:
				break more
			}
		}
		start := time.Now()
		if err := outage.Retry(s.hard, s.pgDown, s.r.store.Barrier); err != nil {
			return s.gaveUp(err)
		}
		s.r.metrics.Observe("barrier", start)
		s.r.statusTime.observe(time.Since(start))
		if !firstAck.IsZero() {
			s.r.metrics.AckToDurable.Observe(time.Since(firstAck).Seconds())
		}
		s.tr.madeDurable(last.lastSeq)
		spacing.Reset(barrierEvery)
		select {
		case <-spacing.C:
		case <-s.hard.Done():
			return s.gaveUp(s.hard.Err())
		}
	}
	return nil
}
