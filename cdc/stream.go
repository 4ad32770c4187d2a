// Package cdc reads the outbox's inserts from a logical replication slot with
// pgoutput and reports back only the positions its caller has made durable.
package cdc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/outbox-relay/outbox-relay/internal/pgdial"
)

// Defaults for Config.
const (
	SlotDefault           = "outbox_relay"
	PublicationDefault    = "outbox_relay"
	StatusIntervalDefault = time.Second
	TimeoutDefault        = pgdial.TimeoutDefault
)

// ErrSilent: nothing at all came from the server on the replication
// connection for Config.Timeout, although the stream asked for a reply.
// The connection is dead or the server stuck; open a new stream.
var ErrSilent = errors.New("replication connection silent")

// Config says which slot to read and how often to report progress.
type Config struct {
	// DatabaseURL is a libpq URL or DSN; replication=database is added.
	DatabaseURL string
	// Slot is the logical replication slot, created if missing.
	Slot string
	// Publication names the publication of outbox.events, created if missing.
	Publication string
	// Tables are the mapped tables (quoted, schema-qualified names) a
	// publication the relay creates publishes beside outbox.events. An
	// existing publication is left as it is.
	Tables []string
	// StatusInterval is how often the confirmed position is sent to the server.
	StatusInterval time.Duration
	// Timeout is how long the replication connection may stay silent
	// before Receive gives up on it (ErrSilent). After a quarter of it
	// without a message, each status asks the server for a reply, so a live
	// server is never silent that long. It also bounds every write on the
	// connection, is the server's wal_sender_timeout for this connection,
	// and the TCP user timeout of every connection cdc opens.
	Timeout time.Duration
	// Failover creates the slot with FAILOVER, so that it survives a
	// failover to a standby (PostgreSQL 17 and newer; ErrSetup before).
	Failover bool
	// BeforeCreate, when set, is called just before Open creates the slot.
	BeforeCreate func(ctx context.Context) error
	// OnCreate, when set, is called once Open has created the slot and
	// before streaming starts, with the name of the snapshot the slot
	// exported: the committed rows visible in it are exactly those the
	// stream will not bring. It must import the snapshot (SET TRANSACTION
	// SNAPSHOT) before it returns; the snapshot stays valid in the
	// importing transaction after that.
	OnCreate func(ctx context.Context, snapshot string) error
}

func (c *Config) withDefaults() Config {
	out := *c
	out.Slot = cmp.Or(out.Slot, SlotDefault)
	out.Publication = cmp.Or(out.Publication, PublicationDefault)
	out.StatusInterval = cmp.Or(out.StatusInterval, StatusIntervalDefault)
	out.Timeout = cmp.Or(out.Timeout, TimeoutDefault)
	return out
}

// Positioner tells the stream how far its caller has durably handled the
// stream: the end LSN of the last transaction all of whose rows are handled.
type Positioner interface {
	Confirmed() pglogrepl.LSN
}

// Stream is one replication connection reading the slot.
type Stream struct {
	cfg     Config
	conn    *pgconn.PgConn
	dec     *decoder
	started pglogrepl.LSN
	// replayUntil: see ReplayUntil.
	replayUntil pglogrepl.LSN

	// Receive-loop state, owned by the goroutine calling Receive.
	inTxn         bool
	lastCommitEnd pglogrepl.LSN // end LSN of the last commit handed out
	walEnd        pglogrepl.LSN // the server's WAL end from the last keepalive
	reported      pglogrepl.LSN // the last position sent to the server
	broken        bool          // Receive failed: the connection is not trusted with a last status
	heardAt       time.Time     // when the server was last heard (or we stopped reading); monotonic
	active        atomic.Int64  // unix nanoseconds of the receive loop's last turn
	heard         atomic.Int64  // heardAt as unix nanoseconds, for other goroutines
	data          atomic.Uint64 // WAL data messages received
	held          atomic.Pointer[heldNotice]
}

// HeldBack is the server's word that it holds the slot's changes back until
// a standby confirms them (synchronized_standby_slots, PostgreSQL 17 and
// newer): a warning the walsender sends on the replication connection
// while it waits for a standby whose slot is inactive.
type HeldBack struct {
	// StandbySlot is the standby's physical slot the server waits for.
	StandbySlot string
	// Message, Detail and Hint are the server's words.
	Message, Detail, Hint string
	At                    time.Time
}

// heldNotice is a HeldBack and how many WAL data messages had come before it.
type heldNotice struct {
	HeldBack
	data uint64
}

// HeldBack reports whether the server holds the slot back now: it said so
// within window and has sent no WAL data since.
func (s *Stream) HeldBack(window time.Duration) (HeldBack, bool) {
	h := s.held.Load()
	if h == nil || time.Since(h.At) > window || s.data.Load() != h.data {
		return HeldBack{}, false
	}
	return h.HeldBack, true
}

// notice keeps what the server says of holding the slot back for a standby;
// other notices are the server's log, not the relay's.
func (s *Stream) notice(n *pgproto3.NoticeResponse) {
	if !strings.Contains(n.Message, "synchronized_standby_slots") {
		return
	}
	slot := ""
	if _, rest, ok := strings.Cut(n.Message, `"`); ok {
		slot, _, _ = strings.Cut(rest, `"`)
	}
	s.held.Store(&heldNotice{HeldBack: HeldBack{StandbySlot: slot, Message: n.Message, Detail: n.Detail, Hint: n.Hint,
		At: time.Now()}, data: s.data.Load()})
}

// LastHeard is when the last message came from the server. Time the
// stream spends not reading, because its output is full, counts as heard.
func (s *Stream) LastHeard() time.Time { return time.Unix(0, s.heard.Load()) }

// BackendPID is the process id of the walsender serving this stream.
func (s *Stream) BackendPID() uint32 { return s.conn.PID() }

func (s *Stream) hear(now time.Time) {
	s.heardAt = now
	s.heard.Store(now.UnixNano())
}

// LastActive is when the receive loop last made progress: received a
// message or keepalive, or reported its position. It goes on while Receive
// waits for room in its output.
func (s *Stream) LastActive() time.Time { return time.Unix(0, s.active.Load()) }

// Open prepares the slot and publication (see Prepare) and starts streaming
// from the slot's confirmed position, creating the slot if it is missing.
// A slot another process streams from gives a *SlotInUseError; an
// invalidated one ErrSlotInvalid.
func Open(ctx context.Context, cfg Config) (*Stream, error) {
	cfg = cfg.withDefaults()
	sc, err := pgdial.Connect(ctx, cfg.DatabaseURL, cfg.Timeout)
	if err != nil {
		return nil, err
	}
	defer sc.Close(context.WithoutCancel(ctx))
	slot, err := Prepare(ctx, sc, cfg)
	if err != nil {
		return nil, err
	}
	conn, err := connectReplication(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s, err := start(ctx, conn, sc, cfg, slot)
	if err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return s, nil
}

func connectReplication(ctx context.Context, cfg Config) (*pgconn.PgConn, error) {
	pc, err := pgconn.ParseConfig(cfg.DatabaseURL)
	if err != nil { // pgconn's error quotes the URL
		return nil, fmt.Errorf("parsing database URL: %w", pgdial.ErrBadURL)
	}
	pc.RuntimeParams["replication"] = "database"
	pc.RuntimeParams["application_name"] = "outbox-relay"
	// The walsender gives up on a relay that stops answering after the same
	// silence as the relay gives up on it, and pings at half of it: a relay
	// that lost its connection finds the slot free again that soon.
	pc.RuntimeParams["wal_sender_timeout"] = fmt.Sprint(cfg.Timeout.Milliseconds())
	pgdial.Apply(pc, cfg.Timeout)
	conn, err := pgconn.ConnectConfig(ctx, pc)
	if err != nil {
		return nil, walSendersFull(fmt.Errorf("opening replication connection: %w", pgdial.Explain(err)))
	}
	return conn, nil
}

// start creates the slot if it is missing and starts replication on conn.
func start(ctx context.Context, conn *pgconn.PgConn, sc *pgx.Conn, cfg Config, slot SlotInfo) (*Stream, error) {
	if slot.Created {
		var err error
		if slot.ConfirmedFlush, err = createSlot(ctx, conn, cfg); err != nil {
			return nil, err
		}
	}
	err := pglogrepl.StartReplication(ctx, conn, quoteIdent(cfg.Slot), 0, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{
			"proto_version '1'",
			"publication_names " + QuoteLiteral(cfg.Publication),
			"binary 'true'",
		},
	})
	if err != nil {
		if e := cmp.Or(slotInUse(err, cfg.Slot), slotInvalid(err, cfg.Slot)); e != nil {
			return nil, e
		}
		return nil, fmt.Errorf("starting replication on slot %q: %w", cfg.Slot, err)
	}
	// Whoever read this slot before has stopped (the slot was free), so no
	// transaction committing after this point reached them.
	var current string
	if err := sc.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&current); err != nil {
		return nil, fmt.Errorf("reading the WAL position: %w", err)
	}
	replayUntil, err := pglogrepl.ParseLSN(current)
	if err != nil {
		return nil, fmt.Errorf("parsing WAL position %q: %w", current, err)
	}
	s := &Stream{
		cfg: cfg, conn: conn, dec: newDecoder(), replayUntil: replayUntil,
		started: slot.ConfirmedFlush, reported: slot.ConfirmedFlush, lastCommitEnd: slot.ConfirmedFlush,
	}
	s.hear(time.Now())
	return s, nil
}

// createSlot creates the slot on the replication connection, exporting its
// snapshot to cfg.OnCreate when that is set, and returns its consistent
// point. Creating a slot waits for every transaction open at that moment.
func createSlot(ctx context.Context, conn *pgconn.PgConn, cfg Config) (pglogrepl.LSN, error) {
	if cfg.BeforeCreate != nil {
		if err := cfg.BeforeCreate(ctx); err != nil {
			return 0, err
		}
	}
	snapshot, option := "NOEXPORT_SNAPSHOT", "nothing"
	if cfg.OnCreate != nil {
		snapshot, option = "EXPORT_SNAPSHOT", "export"
	}
	sql := fmt.Sprintf("CREATE_REPLICATION_SLOT %s LOGICAL pgoutput %s", quoteIdent(cfg.Slot), snapshot)
	if cfg.Failover { // PostgreSQL 17's option list (Prepare checked the version)
		sql = fmt.Sprintf("CREATE_REPLICATION_SLOT %s LOGICAL pgoutput (SNAPSHOT '%s', FAILOVER)", quoteIdent(cfg.Slot), option)
	}
	res, err := pglogrepl.ParseCreateReplicationSlot(conn.Exec(ctx, sql))
	if err != nil {
		if inUse := slotInUse(err, cfg.Slot); inUse != nil {
			return 0, inUse
		}
		if full := slotsFull(ctx, conn, err); full != nil {
			return 0, full
		}
		return 0, fmt.Errorf("creating replication slot %q: %w", cfg.Slot, err)
	}
	lsn, err := pglogrepl.ParseLSN(res.ConsistentPoint)
	if err != nil {
		return 0, fmt.Errorf("parsing slot LSN %q: %w", res.ConsistentPoint, err)
	}
	if cfg.OnCreate != nil {
		if err := cfg.OnCreate(ctx, res.SnapshotName); err != nil {
			return 0, fmt.Errorf("using the snapshot of new slot %q: %w", cfg.Slot, err)
		}
	}
	return lsn, nil
}

// ReplayUntil is the WAL position when streaming started. A transaction
// committing at or before it may have been (partly) handled by whoever read
// the slot before; one committing after it is new to everyone.
func (s *Stream) ReplayUntil() pglogrepl.LSN { return s.replayUntil }

// StartLSN is the slot's confirmed position when the stream opened.
func (s *Stream) StartLSN() pglogrepl.LSN { return s.started }

// Receive decodes the stream into out until ctx is done (it then returns nil)
// or the connection fails. Every StatusInterval, and whenever the server asks,
// it confirms pos.Confirmed(). When every transaction handed out is durable
// and none is open, it confirms the server's WAL end from keepalives, so a
// quiet outbox beside busy tables does not hold WAL back. A full out blocks
// Receive, which keeps reporting status while it waits. A server silent for
// Config.Timeout ends it with ErrSilent.
func (s *Stream) Receive(ctx context.Context, out chan<- Change, pos Positioner) error {
	err := s.receive(ctx, out, pos)
	if err != nil {
		s.broken = true
	}
	return err
}

func (s *Stream) receive(ctx context.Context, out chan<- Change, pos Positioner) error {
	next := time.Now()
	quiet := s.cfg.Timeout / 4
	received := false // the last turn brought a message
	// Reads wait under the socket's deadline (readDeadline), not under ctx:
	// ctx ending moves the deadline to now, which ends a read at once.
	wait := readDeadline{conn: s.conn.Conn()}
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(fired)
		_ = wait.conn.SetReadDeadline(time.Now())
	})
	defer func() {
		// The loop may see ctx end before the AfterFunc has run: wait for
		// it, or its deadline would fall on Close's reads.
		if !stop() {
			<-fired
		}
		_ = wait.conn.SetReadDeadline(time.Time{})
	}()
	for {
		now := time.Now()
		s.active.Store(now.UnixNano())
		if received { // stamped with this turn's clock reading: one per turn
			s.hear(now)
		}
		silent := now.Sub(s.heardAt)
		if silent >= s.cfg.Timeout {
			return fmt.Errorf("%w: nothing from the server on slot %q for %s (--replication-timeout %s)",
				ErrSilent, s.cfg.Slot, silent.Round(time.Millisecond), s.cfg.Timeout)
		}
		if !now.Before(next) {
			if err := s.sendStatus(pos, silent >= quiet); err != nil {
				return err
			}
			next = time.Now().Add(s.cfg.StatusInterval)
		}
		if err := wait.by(earliest(next, s.heardAt.Add(s.cfg.Timeout)), now); err != nil {
			return fmt.Errorf("receiving from slot %q: %w", s.cfg.Slot, err)
		}
		if ctx.Err() != nil { // ended before the deadline was set: it may have undone the AfterFunc's
			return nil
		}
		msg, err := s.conn.ReceiveMessage(context.Background())
		received = err == nil
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if pgconn.Timeout(err) {
				continue
			}
			return fmt.Errorf("receiving from slot %q: %w", s.cfg.Slot, err)
		}
		if err := s.handle(ctx, msg, out, pos, &next); err != nil {
			return err
		}
	}
}

// handle acts on one message from the server; a keepalive that asks for a
// reply sets next to now.
func (s *Stream) handle(ctx context.Context, msg pgproto3.BackendMessage, out chan<- Change, pos Positioner, next *time.Time) error {
	switch msg := msg.(type) {
	case *pgproto3.CopyData:
		return s.copyData(ctx, msg.Data, out, pos, next)
	case *pgproto3.NoticeResponse:
		s.notice(msg)
	case *pgproto3.ErrorResponse:
		return fmt.Errorf("slot %q: %w", s.cfg.Slot, pgconn.ErrorResponseToPgError(msg))
	case *pgproto3.CopyDone:
		return fmt.Errorf("slot %q: server ended the replication stream", s.cfg.Slot)
	}
	return nil
}

// copyData acts on one CopyData message: a keepalive, or WAL data whose
// change (if it is one the caller wants) goes to out.
func (s *Stream) copyData(ctx context.Context, data []byte, out chan<- Change, pos Positioner, next *time.Time) error {
	if len(data) == 0 {
		return nil
	}
	switch data[0] {
	case pglogrepl.PrimaryKeepaliveMessageByteID:
		ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
		if err != nil {
			return fmt.Errorf("parsing keepalive: %w", err)
		}
		s.walEnd = max(s.walEnd, ka.ServerWALEnd)
		if ka.ReplyRequested {
			*next = time.Time{}
		}
	case pglogrepl.XLogDataByteID:
		xld, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			return fmt.Errorf("parsing XLogData: %w", err)
		}
		s.data.Add(1)
		ch, ok, err := s.dec.decode(xld.WALData)
		if err != nil {
			return fmt.Errorf("at LSN %s: %w", xld.WALStart, err)
		}
		if !ok {
			return nil
		}
		switch ch.Kind {
		case KindBegin:
			s.inTxn = true
		case KindCommit:
			s.inTxn = false
			s.lastCommitEnd = ch.LSN
		}
		return s.push(ctx, out, ch, pos, next)
	}
	return nil
}

// push hands ch to out, reporting status while out is full. The time it
// waits is not the server's silence: it counts as heard.
func (s *Stream) push(ctx context.Context, out chan<- Change, ch Change, pos Positioner, next *time.Time) error {
	select {
	case out <- ch:
		return nil
	default:
	}
	defer func() { s.hear(time.Now()) }()
	for {
		t := time.NewTimer(time.Until(*next))
		select {
		case out <- ch:
			t.Stop()
			return nil
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
			s.active.Store(time.Now().UnixNano())
			if err := s.sendStatus(pos, false); err != nil {
				return err
			}
			*next = time.Now().Add(s.cfg.StatusInterval)
		}
	}
}

// position is what may be confirmed now.
func (s *Stream) position(pos Positioner) pglogrepl.LSN {
	p := max(s.reported, pos.Confirmed())
	if !s.inTxn && p >= s.lastCommitEnd {
		// Everything handed out is durable: what the server has sent us up to
		// its WAL end holds no further outbox commit.
		p = max(p, s.walEnd)
	}
	return p
}

// sendStatus reports the position, asking the server to answer at once when
// reply is set. The write fails after Config.Timeout: one into a dead
// connection whose buffer is full would otherwise wait for ever.
func (s *Stream) sendStatus(pos Positioner, reply bool) error {
	p := s.position(pos)
	nc := s.conn.Conn()
	if err := nc.SetWriteDeadline(time.Now().Add(s.cfg.Timeout)); err != nil {
		return fmt.Errorf("sending standby status: %w", err)
	}
	err := pglogrepl.SendStandbyStatusUpdate(context.Background(), s.conn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: p, ReplyRequested: reply,
	})
	if err != nil {
		return fmt.Errorf("sending standby status on slot %q: %w", s.cfg.Slot, err)
	}
	if err := nc.SetWriteDeadline(time.Time{}); err != nil {
		return fmt.Errorf("sending standby status: %w", err)
	}
	s.reported = p
	return nil
}

// readDeadline bounds each wait of the receive loop with the socket's read
// deadline, set only when the wanted deadline moves earlier or has passed: a
// deadline context per message (pgconn watches each with context.AfterFunc,
// and each had its own timer) was about 10 % of the relay's CPU in a drain.
// Ending early only costs a turn of the loop.
type readDeadline struct {
	conn net.Conn
	at   time.Time
}

// by has the next read end by dl at the latest.
func (r *readDeadline) by(dl, now time.Time) error {
	if !r.at.IsZero() && !r.at.After(dl) && r.at.After(now) {
		return nil
	}
	r.at = dl
	return r.conn.SetReadDeadline(dl)
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// Confirmed is the last position reported to the server.
func (s *Stream) Confirmed() pglogrepl.LSN { return s.reported }

// Close confirms pos.Confirmed() one last time, ends replication cleanly so
// the server has processed that confirmation and released the slot, and
// closes the connection. Call it after Receive has returned. A stream whose
// connection failed is only closed: its slot moves on from what the server
// last took.
func (s *Stream) Close(ctx context.Context, pos Positioner) error {
	closeCtx, cancelClose := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancelClose()
	defer s.conn.Close(closeCtx)
	if s.broken {
		return nil
	}
	if err := s.sendStatus(pos, false); err != nil {
		return err
	}
	// SendStandbyCopyDone reads the server's answer without a context: the
	// socket's deadlines bound it. The walsender releases the slot before it
	// answers, so once it has, the slot is free for the next process.
	dl := time.Now().Add(min(5*time.Second, s.cfg.Timeout))
	if err := s.conn.Conn().SetDeadline(dl); err != nil {
		return fmt.Errorf("ending replication: %w", err)
	}
	if _, err := pglogrepl.SendStandbyCopyDone(ctx, s.conn); err != nil && !pgconn.Timeout(err) {
		return fmt.Errorf("ending replication: %w", err)
	}
	return nil
}
