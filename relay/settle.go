package relay

import (
	"math/rand/v2"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/outbox-relay/outbox-relay/internal/kafka"
	"github.com/outbox-relay/outbox-relay/internal/metrics"
	"github.com/outbox-relay/outbox-relay/internal/store"
	"github.com/outbox-relay/outbox-relay/retry"
)

// settler turns what happened to an event into its status row: the retry
// policy that applies to it, and for a failed attempt its next try or
// RETRIES_EXHAUSTED. The stream and the poller share one.
type settler struct {
	def retry.Policy // the configured policy
	log *zap.Logger
	mu  sync.Mutex // guards rnd
	rnd *rand.Rand
}

// policy is the configured retry policy with an event's own max attempts,
// if it set one (> 0).
func (s *settler) policy(maxAttempts int32) retry.Policy { return withMaxAttempts(s.def, maxAttempts) }

// stored reads the policy fixed in a status row; rows without one (an
// operator's resend of an event that had none) get the configured one.
func (s *settler) stored(policy []byte, maxAttempts int32) retry.Policy {
	p, err := retry.ParsePolicy(policy, s.def)
	if err != nil {
		s.log.Warn("unreadable retry_policy in a status row; using the configured policy", zap.Error(err))
		p = s.def
	}
	return withMaxAttempts(p, maxAttempts)
}

func withMaxAttempts(p retry.Policy, maxAttempts int32) retry.Policy {
	if maxAttempts > 0 {
		p.MaxAttempts = int(maxAttempts)
	}
	return p
}

// outcome is the status row e leaves after an attempt on top of prior
// ones, under policy p; prev is the wait before this attempt. An invalid
// event, or one refused before it was sent (its topic), was never sent, so
// it counts no attempt.
func (s *settler) outcome(e *event, prior int32, p retry.Policy, prev time.Duration) store.Outcome {
	o := store.Outcome{EventID: e.id, Attempts: prior + 1, MaxAttempts: int32(p.MaxAttempts),
		CommitLSN: e.commitLSN, TxPosition: e.txPos}
	switch res := &e.Outcome; {
	case e.deferred():
		// Never sent: no attempt. Due now, for the poller, or once the
		// backfill is done if it is queued behind it.
		o.Status, o.Attempts = store.StatusPending, prior
		if e.afterBackfill {
			o.Delay = store.UntilBackfilled
		}
	case e.invalid != "":
		o.Status, o.Reason, o.LastError, o.Attempts = store.StatusFailed, store.ReasonInvalidEvent, e.invalid, prior
	case res.Result == kafka.Sent:
		o.Status, o.Partition, o.Offset = store.StatusSent, res.Partition, res.Offset
	case res.Result == kafka.Rejected:
		o.Status, o.Reason, o.LastError = store.StatusFailed, res.Reason, res.Err.Error()
		if res.Unsent {
			o.Attempts = prior
		}
	case p.Exhausted(int(o.Attempts)):
		o.Status, o.Reason, o.LastError = store.StatusFailed, store.ReasonRetriesExhausted, res.Err.Error()
	default:
		o.Status, o.LastError = store.StatusPending, res.Err.Error()
		s.mu.Lock()
		o.Delay = p.Next(int(o.Attempts), prev, s.rnd)
		s.mu.Unlock()
	}
	if o.Status == store.StatusFailed {
		logFailed(s.log, string(kafka.FormatUUID(e.id)), e.Record.Topic, o.Reason, o.LastError, o.Attempts)
	}
	return o
}

// logFailed says that an event ended FAILED: every such event is logged
// once, where its status is decided.
func logFailed(log *zap.Logger, eventID, topic, reason, lastError string, attempts int32) {
	log.Warn("event failed: "+reason+"; fix the cause and resend it (outbox-relay resend), or skip it",
		zap.String("event_id", eventID), zap.String("topic", topic), zap.String("reason", reason),
		zap.String("error", lastError), zap.Int32("attempts", attempts))
}

// count adds e's attempt, which left o, to a metrics tally.
func count(t *metrics.Tally, e *event, o store.Outcome) {
	topic, refused := e.Record.Topic, e.unsent()
	add := func(outcome, reason string) {
		t.Add(topic, outcome, reason, refused)
		if e.copy != nil {
			t.AddTable(e.copy.Source, outcome)
		}
	}
	if e.deferred() {
		add(metrics.Queued, "")
		return
	}
	if e.Outcome.Result != 0 && !refused {
		add(metrics.Published, "")
	}
	switch o.Status {
	case store.StatusSent:
		add(metrics.Sent, "")
	case store.StatusPending:
		add(metrics.Retried, "")
	case store.StatusFailed:
		add(metrics.Failed, o.Reason)
	}
}
