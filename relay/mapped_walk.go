package relay

import (
	"context"
	"fmt"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/kafka"
	"github.com/outbox-relay/outbox-relay/internal/mapping"
	"github.com/outbox-relay/outbox-relay/internal/metrics"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

// The paths that read a mapped table itself, rather than the stream: the
// backfill of a new slot, the gap sweep and poll mode. They need its order
// columns (mapping.OrderSQL); a table without them is relayed from the
// stream alone. Each gives the rows it finds without a status row a PENDING
// row with the record kept (outbox.mapped_events), as the stream does for
// an event it queues, and the poller delivers them from the record in key
// order (outbox_seq): what the walk finds is, per key, a prefix of the
// table's rows in insertion order.

// mappedPender writes the PENDING rows of pages of mapped rows.
type mappedPender struct {
	settle *settler
	tally  *metrics.Tally
	policy []byte // the configured retry policy's JSON, for the rows it writes
	rows   store.Outcomes
	ce     *ceWriter // nil: records are not CloudEvents
}

func newMappedPender(s *settler, m *metrics.Metrics, policy []byte, ce *ceWriter) *mappedPender {
	return &mappedPender{settle: s, tally: m.NewTally(), policy: policy, ce: ce}
}

// pend gives the rows of page, read from t, PENDING rows due now with their
// records kept, through st; a row the mapping cannot make a record of gets
// a FAILED INVALID_EVENT row instead, as on the stream. It returns how many
// rows it wrote (rows that exist are left alone).
func (p *mappedPender) pend(ctx context.Context, st *store.Store, t *mapping.Table, page *store.MappedPage) (int, error) {
	if len(page.Values) == 0 {
		return 0, nil
	}
	bound, err := t.Bind(page.Events)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrBadTable, err)
	}
	l := &mappedLayout{source: t.QualifiedName(), bound: bound, table: t, ce: p.ce}
	p.rows.Reset()
	for i, values := range page.Values {
		var e event
		l.fill(&e, values, page.Times[i])
		if e.invalid == "" {
			e.Outcome = kafka.Outcome{Result: kafka.Deferred} // never sent here: the poller sends it
		}
		o := p.settle.outcome(&e, 0, p.settle.def, 0)
		p.rows.Add(o)
		p.rows.AddCopy(*e.keptCopy())
		count(p.tally, &e, o)
	}
	written, err := st.InsertOutcomes(ctx, &p.rows, p.policy)
	if err != nil {
		return 0, err
	}
	p.tally.Flush()
	return written, nil
}

// walkMapped gives PENDING rows to the rows of t without one, read through
// from (a snapshot's store for a backfill, else the relay's), whose
// outbox_created_at lies in [after's time, upper) (upper zero: no bound),
// page by page, writing through to. It returns the rows written and the
// cursor after the last row read; with limit > 0 it stops after a page of
// limit rows (more reports that more may follow).
func (p *mappedPender) walkMapped(ctx context.Context, from, to *store.Store, t *mapping.Table, after store.BackfillCursor,
	upper time.Time, page, maxBytes int, once bool) (written int, next store.BackfillCursor, more bool, err error) {
	next = after
	for {
		rows, err := from.MappedUnrelayed(ctx, t, next, upper, page, maxBytes)
		if err != nil {
			return written, next, false, err
		}
		n, err := p.pend(ctx, to, t, rows)
		written += n
		if err != nil {
			return written, next, false, err
		}
		next = rows.Next
		if !rows.Full || once {
			return written, next, rows.Full, nil
		}
	}
}
