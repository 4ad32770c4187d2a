package relay

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/cenkalti/backoff/v4"
	"go.uber.org/zap"
)

// breakerState is the Kafka circuit breaker's state.
type breakerState int

const (
	breakerClosed   breakerState = iota // delivering
	breakerOpen                         // cluster unavailable: nothing is sent
	breakerHalfOpen                     // one probe message is out
)

// Publisher sends events through an idempotent, acks=all async producer and
// keeps cluster outages away from the events: an "unavailable" error opens a
// circuit breaker and sending pauses. Once everything in flight is back, the
// producer is closed; after a backoff a new one is connected (half-open) and
// the returned messages are resent in their original order, the first alone
// as a probe. A new producer starts with a new producer id, so no sequence
// state of the old one survives the outage. Events see only final outcomes.
type Publisher struct {
	connect func() (sarama.AsyncProducer, error)
	log     *zap.Logger
	backoff backoff.BackOff
	topics  topicChecker

	stopCtx  context.Context // ends recovery at Close
	stopping context.CancelFunc

	mu         sync.Mutex
	cond       *sync.Cond
	producer   sarama.AsyncProducer // nil while the breaker is open
	collected  chan struct{}        // closed when producer's outcomes are all read
	state      breakerState
	recovering bool
	inFlight   int      // handed to sarama, not yet returned
	resend     []*event // came back "unavailable", waiting to be resent
	openedAt   time.Time
}

// newPublisher sends through producer; connect makes a replacement after an
// outage, and bo paces those attempts while the cluster is down. lookup finds
// a topic's partitions (sarama's cached client metadata).
func newPublisher(producer sarama.AsyncProducer, connect func() (sarama.AsyncProducer, error), lookup func(string) ([]int32, error), bo backoff.BackOff, log *zap.Logger) *Publisher {
	p := &Publisher{connect: connect, backoff: bo, log: log, topics: topicChecker{lookup: lookup, bad: map[string]badTopic{}}}
	p.stopCtx, p.stopping = context.WithCancel(context.Background())
	p.cond = sync.NewCond(&p.mu)
	p.use(producer)
	return p
}

// use makes producer the current one and starts reading its outcomes.
// Called with p.mu held, or before p is shared.
func (p *Publisher) use(producer sarama.AsyncProducer) {
	p.producer = producer
	p.collected = make(chan struct{})
	go p.collect(producer, p.collected)
}

// Available reports whether the breaker is closed: the poller claims nothing
// while it is not.
func (p *Publisher) Available() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state == breakerClosed && len(p.resend) == 0 && !p.recovering
}

// publishBatch hands b's events to Kafka in order: events that already have
// a status row are skipped, rows that cannot be messages get FAILED with
// INVALID_EVENT, the rest are sent. Each outcome completes one of b's
// pending counts. It returns ctx's error when it stops early.
func (r *Relay) publishBatch(ctx context.Context, b *batch) error {
	for i := range b.events {
		e := &b.events[i]
		switch {
		case e.skip:
			b.complete()
		case e.invalid != "":
			e.res = result{status: StatusFailed, reason: ReasonInvalidEvent, lastError: e.invalid}
			r.log.Warn("invalid event", zap.String("event_id", string(formatUUID(e.id))), zap.String("error", e.invalid))
			b.complete()
		default:
			if err := r.pub.send(ctx, e); err != nil {
				return err
			}
		}
	}
	return nil
}

// send hands e to Kafka. It waits while the breaker is open or a recovery is
// resending what an outage sent back, so e never overtakes those, and
// returns ctx.Err() when ctx ends first. The outcome reaches e.batch.
func (p *Publisher) send(ctx context.Context, e *event) error {
	if reason, err := p.topics.check(e.msg.Topic); err != nil {
		e.res = result{status: StatusFailed, attempts: 1, reason: reason, lastError: err.Error()}
		e.batch.complete()
		return nil
	}
	p.mu.Lock()
	if err := p.waitClosed(ctx); err != nil {
		p.mu.Unlock()
		return err
	}
	p.inFlight++
	in := p.producer.Input()
	p.mu.Unlock()
	in <- &e.msg
	return nil
}

// waitClosed waits, with p.mu held, until the breaker is closed and no
// recovery is under way (so nothing new overtakes a resent message), or ctx
// ends.
func (p *Publisher) waitClosed(ctx context.Context) error {
	if p.state == breakerClosed && len(p.resend) == 0 && !p.recovering {
		return nil
	}
	stop := context.AfterFunc(ctx, func() {
		p.mu.Lock()
		p.cond.Broadcast()
		p.mu.Unlock()
	})
	defer stop()
	for (p.state != breakerClosed || len(p.resend) > 0 || p.recovering) && ctx.Err() == nil {
		p.cond.Wait()
	}
	return ctx.Err()
}

// recoverLoop runs recovery steps until the breaker is closed and every
// returned message is resent. One runs per outage, started by returned, so
// recovery goes on whether or not anyone is sending.
func (p *Publisher) recoverLoop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for (p.state != breakerClosed || len(p.resend) > 0) && p.stopCtx.Err() == nil {
		if err := p.recover(p.stopCtx); err != nil {
			break
		}
	}
	p.recovering = false
	p.cond.Broadcast()
}

// recover runs one step of outage recovery. Called with p.mu held, only
// from recoverLoop.
func (p *Publisher) recover(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		p.mu.Lock()
		p.cond.Broadcast()
		p.mu.Unlock()
	})
	defer stop()
	// What is still in flight comes back before anything is resent, so the
	// resend keeps the original order.
	if err := p.waitIdle(ctx); err != nil {
		return err
	}
	if p.state != breakerClosed {
		if p.producer != nil { // retire the producer that saw the outage
			old, collected := p.producer, p.collected
			p.producer = nil
			p.mu.Unlock()
			if err := old.Close(); err != nil {
				p.log.Debug("closing kafka producer after an outage", zap.Error(err))
			}
			<-collected
			p.mu.Lock()
		}
		d := p.backoff.NextBackOff()
		p.mu.Unlock()
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		if ctx.Err() != nil {
			p.mu.Lock()
			return ctx.Err()
		}
		producer, err := p.connect()
		p.mu.Lock()
		if err != nil {
			p.log.Debug("kafka still unavailable: could not connect a producer", zap.Error(err), zap.Duration("after", d))
			return nil // still open: the next step waits longer
		}
		p.use(producer)
		if len(p.resend) == 0 {
			p.close("connected")
			return nil
		}
		p.state = breakerHalfOpen
		p.log.Info("kafka circuit breaker half-open: sending one probe message", zap.Duration("after", d))
		slices.SortFunc(p.resend, func(a, b *event) int { return cmp.Compare(a.seq, b.seq) })
		probe := p.resend[0]
		p.resend = p.resend[1:]
		p.inFlight++
		in := p.producer.Input()
		p.mu.Unlock()
		in <- &probe.msg
		p.mu.Lock()
		if err := p.waitIdle(ctx); err != nil {
			return err
		}
		if p.state != breakerClosed {
			return nil // the probe failed: open again, next step waits longer
		}
	}
	// Closed: resend the rest in order, then new events may follow. A
	// message to be tried alone goes with nothing else in flight.
	batch := p.resend
	p.resend = nil
	slices.SortStableFunc(batch, func(a, b *event) int { return cmp.Compare(a.seq, b.seq) })
	in := p.producer.Input()
	for _, e := range batch {
		if e.alone {
			if err := p.waitIdle(ctx); err != nil {
				p.resend = append(p.resend, e)
				return err
			}
		}
		p.inFlight++
		p.mu.Unlock()
		in <- &e.msg
		p.mu.Lock()
		if e.alone {
			if err := p.waitIdle(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// waitIdle waits, with p.mu held, until nothing is in flight.
func (p *Publisher) waitIdle(ctx context.Context) error {
	for p.inFlight > 0 && ctx.Err() == nil {
		p.cond.Wait()
	}
	return ctx.Err()
}

// close closes the breaker. Called with p.mu held.
func (p *Publisher) close(why string) {
	if p.state == breakerClosed {
		return
	}
	p.state = breakerClosed
	p.backoff.Reset()
	p.log.Info("kafka recovered: circuit breaker closed", zap.String("why", why),
		zap.Duration("outage", time.Since(p.openedAt)), zap.Int("resending", len(p.resend)))
}

func (p *Publisher) collect(producer sarama.AsyncProducer, collected chan struct{}) {
	defer close(collected)
	succ, errs := producer.Successes(), producer.Errors()
	for succ != nil || errs != nil {
		select {
		case m, ok := <-succ:
			if !ok {
				succ = nil
				continue
			}
			e := m.Metadata.(*event)
			e.res = result{status: StatusSent, attempts: 1, partition: m.Partition, offset: m.Offset}
			p.returned(e, nil)
		case pe, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			e := pe.Msg.Metadata.(*event)
			switch class, reason := classify(pe.Err); class {
			case classUnavailable:
				p.returned(e, pe.Err)
				continue
			case classMessage:
				if reason == ReasonMessageTooLarge && !isClientSizeCheck(pe.Err) && !e.alone {
					// The broker judges the batch: try the message by itself
					// before calling it too large.
					p.resendAlone(e)
					continue
				}
				e.res = result{status: StatusFailed, attempts: 1, reason: reason, lastError: pe.Err.Error()}
			default:
				e.res = result{status: StatusPending, attempts: 1, lastError: pe.Err.Error()}
			}
			p.returned(e, nil)
		}
	}
}

// returned books a message sarama gave back. unavailable != nil puts it in
// line for resending and opens the breaker; otherwise its outcome is final.
func (p *Publisher) returned(e *event, unavailable error) {
	p.mu.Lock()
	p.inFlight--
	if unavailable != nil {
		p.resend = append(p.resend, e)
		switch p.state {
		case breakerClosed:
			p.openedAt = time.Now()
			p.log.Warn("kafka unavailable: circuit breaker open, delivery paused; events are not failed", zap.Error(unavailable))
		case breakerHalfOpen:
			p.log.Info("kafka still unavailable: circuit breaker open again", zap.Error(unavailable))
		}
		p.state = breakerOpen
		p.startRecovery()
	} else if p.state == breakerHalfOpen {
		p.close("probe delivered")
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	if unavailable == nil {
		e.batch.complete()
	}
}

// resendAlone books a message to be sent again by itself.
func (p *Publisher) resendAlone(e *event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inFlight--
	e.alone = true
	p.resend = append(p.resend, e)
	p.startRecovery()
	p.cond.Broadcast()
}

// startRecovery starts recoverLoop unless one runs. Called with p.mu held.
func (p *Publisher) startRecovery() {
	if !p.recovering {
		p.recovering = true
		go p.recoverLoop()
	}
}

// Close shuts the producer down and waits for its last outcomes.
func (p *Publisher) Close() error {
	p.stopping()
	p.mu.Lock()
	for p.recovering {
		p.cond.Wait()
	}
	producer, collected := p.producer, p.collected
	p.producer = nil
	p.mu.Unlock()
	if producer == nil {
		return nil
	}
	err := producer.Close()
	<-collected
	return err
}

// badTopicTTL is how long a topic found missing or forbidden stays so before
// it is looked up again.
const badTopicTTL = 5 * time.Second

// topicChecker fails events for missing, invalid or forbidden topics before
// they reach the producer. Otherwise a burst of them would trip sarama's own
// per-topic breaker, whose "circuit breaker is open" cannot be told apart
// from a cluster outage, and would pause every other event.
type topicChecker struct {
	lookup func(string) ([]int32, error)
	mu     sync.Mutex
	bad    map[string]badTopic
}

type badTopic struct {
	reason string
	err    error
	until  time.Time
}

// check returns the failure reason and the broker's error for a topic no
// event can be delivered to, or a nil error. Unavailability is not decided
// here: the send finds it.
func (c *topicChecker) check(topic string) (string, error) {
	c.mu.Lock()
	b, ok := c.bad[topic]
	c.mu.Unlock()
	if ok && time.Now().Before(b.until) {
		return b.reason, b.err
	}
	return c.refresh(topic)
}

// refresh looks the topic up again, whatever is remembered: an operator's
// resend after fixing the cause must not meet the old answer.
func (c *topicChecker) refresh(topic string) (string, error) {
	_, err := c.lookup(topic)
	if err == nil {
		c.mu.Lock()
		delete(c.bad, topic)
		c.mu.Unlock()
		return "", nil
	}
	class, reason := classify(err)
	if class != classMessage {
		return "", nil
	}
	err = fmt.Errorf("topic %q: %w", topic, err)
	c.mu.Lock()
	c.bad[topic] = badTopic{reason: reason, err: err, until: time.Now().Add(badTopicTTL)}
	c.mu.Unlock()
	return reason, err
}
