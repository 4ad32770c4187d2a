package kafka

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/cenkalti/backoff/v4"
	"go.uber.org/zap"

	"github.com/outbox-relay/outbox-relay/retry"
)

// Result is what became of a message.
type Result int

// Results.
const (
	// Sent: on Kafka, acknowledged by every in-sync replica.
	Sent Result = iota + 1
	// Rejected: this message can never be delivered as it is (Reason says
	// why); an operator fixes the cause and resends it.
	Rejected
	// Failed: anything else; worth another attempt later.
	Failed
	// Deferred: never sent, and no attempt: Kafka was unavailable and the
	// publisher was told to Defer, so the relay queues the message instead.
	Deferred
)

// Outcome is the final word on one message. Cluster outages are never an
// outcome: the publisher waits them out and resends, unless it was told to
// Defer.
type Outcome struct {
	Result    Result
	Reason    string    // Rejected: INVALID_TOPIC, UNAUTHORIZED_ON_TOPIC, MESSAGE_TOO_LARGE, TOPIC_NOT_ALLOWED
	Err       error     // Rejected and Failed: the broker's or the client's words
	Partition int32     // Sent
	Offset    int64     // Sent
	At        time.Time // when the outcome came back
	// Unsent: Rejected before it was handed to the producer (its topic's
	// name, the allowlist, the topic's metadata): it counts no attempt.
	Unsent bool
}

// Receiver hears about each message Publish was given, once, when its
// outcome is final. Done may run on any goroutine.
type Receiver interface {
	Done(m *Message)
}

// Publisher sends messages through an idempotent, acks=all async producer
// and keeps cluster outages away from them with a circuit breaker (see
// breaker.go). Messages see only final outcomes.
type Publisher struct {
	connect func(context.Context) (sarama.AsyncProducer, error)
	log     *zap.Logger
	backoff backoff.BackOff
	topics  topicChecker
	dial    *dialer // nil in tests

	stopCtx  context.Context // ends recovery at Close
	stopping context.CancelFunc

	mu         sync.Mutex
	cond       *sync.Cond
	producer   sarama.AsyncProducer // nil while the breaker is open
	collected  chan struct{}        // closed when producer's outcomes are all read
	state      BreakerState
	recovering bool
	flying     flight     // handed to sarama, not yet returned
	resend     []*Message // came back "unavailable", waiting to be resent
	openedAt   time.Time
	deferring  bool // outage messages get Deferred instead of waiting (Defer)
	nextSeq    uint64
	onState    func(BreakerState) // OnTransition's listener
	refusal    string             // the last refusal recovery logged
	lastErr    error              // why the last connection attempt failed; nil once connected
}

// OnTransition has fn called (with the publisher's lock held: it must be
// quick) each time the breaker changes state, and at once if it is not
// closed. Set it before publishing.
func (p *Publisher) OnTransition(fn func(BreakerState)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.onState = fn
	if p.state != BreakerClosed {
		fn(p.state)
	}
}

// Open makes a Publisher for cfg and connects it. A configuration that can
// never work is an error. A cluster that cannot be reached is not: the
// publisher then starts with its breaker open and connects in the
// background, so the relay can stream (and spill) meanwhile. Open returns
// ctx's error if ctx ends first.
func Open(ctx context.Context, cfg Config, log *zap.Logger) (*Publisher, error) {
	sc, err := cfg.Sarama()
	if err != nil {
		return nil, err
	}
	allow, err := NewAllowlist(cfg.Topics)
	if err != nil {
		return nil, err
	}
	allow.AllowDeadLetters(cfg.DeadLetterTopic)
	d := &dialer{cfg: cfg.withDefaults(), sc: sc}
	producer, err := connectWithin(ctx, d.producer)
	switch {
	case ctx.Err() != nil:
		return nil, errors.Join(ctx.Err(), d.close())
	case isRefusal(err):
		return nil, errors.Join(err, d.close())
	case err != nil:
		log.Warn("kafka unavailable at start: circuit breaker open, delivery paused until it connects; events are not failed",
			zap.Error(err))
	}
	p := newPublisher(producer, d.producer, d.partitions, retry.Reconnect(200*time.Millisecond, 30*time.Second), log)
	p.topics.allow = allow
	p.dial = d
	p.lastErr = err
	if err == nil {
		p.warnSkipped()
	}
	return p, nil
}

// connectWithin runs connect and returns its result, or ctx's error as
// soon as ctx ends: sarama's own dials and metadata requests cannot be
// cancelled, and a stop must not wait for them. A producer connected
// after ctx ended is closed.
func connectWithin(ctx context.Context, connect func(context.Context) (sarama.AsyncProducer, error)) (sarama.AsyncProducer, error) {
	type result struct {
		producer sarama.AsyncProducer
		err      error
	}
	done := make(chan result, 1)
	go func() {
		producer, err := connect(ctx)
		done <- result{producer, err}
	}()
	select {
	case r := <-done:
		return r.producer, r.err
	case <-ctx.Done():
		go func() {
			if r := <-done; r.producer != nil {
				_ = r.producer.Close() //nolint:errcheck // abandoned
			}
		}()
		return nil, ctx.Err()
	}
}

// LastError is why the last attempt to connect failed, or nil when the
// publisher is connected or has not tried.
func (p *Publisher) LastError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastErr
}

// newPublisher sends through producer; connect makes a replacement after an
// outage, and bo paces those attempts while the cluster is down. lookup finds
// a topic's partitions (sarama's cached client metadata). A nil producer
// starts the publisher with its breaker open, recovering.
func newPublisher(producer sarama.AsyncProducer, connect func(context.Context) (sarama.AsyncProducer, error),
	lookup func(string) ([]int32, error), bo backoff.BackOff, log *zap.Logger) *Publisher {
	p := &Publisher{connect: connect, backoff: bo, log: log, topics: topicChecker{lookup: lookup, bad: map[string]badTopic{}}}
	p.stopCtx, p.stopping = context.WithCancel(context.Background())
	p.cond = sync.NewCond(&p.mu)
	if producer == nil {
		p.state, p.openedAt = BreakerOpen, time.Now()
		p.startRecovery()
	} else {
		p.use(producer)
	}
	return p
}

// use makes producer the current one and starts reading its outcomes.
// Called with p.mu held, or before p is shared.
func (p *Publisher) use(producer sarama.AsyncProducer) {
	p.producer = producer
	p.collected = make(chan struct{})
	go p.collect(producer, p.collected)
}

// Available reports whether the breaker is closed with nothing waiting to
// be resent: the poller claims nothing while it is not.
func (p *Publisher) Available() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.clear()
}

// Publish hands msgs to Kafka in order; to hears each one's outcome once it
// is final. It waits while the breaker is open or a recovery is resending
// what an outage sent back, so nothing overtakes those. It returns ctx's
// error when ctx ends first: the messages not yet handed over then never
// get an outcome.
func (p *Publisher) Publish(ctx context.Context, msgs []*Message, to Receiver) error {
	for _, m := range msgs {
		m.to = to
		m.Record.Metadata = m
		if reason, err := p.topics.check(m); err != nil {
			m.Outcome = Outcome{Result: Rejected, Reason: reason, Err: err, Unsent: true}
			to.Done(m)
			continue
		}
		p.mu.Lock()
		if err := p.waitClosed(ctx); err != nil {
			p.mu.Unlock()
			return err
		}
		if p.deferring && !p.clear() {
			p.mu.Unlock()
			m.Outcome = Outcome{Result: Deferred}
			to.Done(m)
			continue
		}
		p.flying.push(m)
		p.nextSeq++
		m.seq = p.nextSeq
		in := p.producer.Input()
		p.mu.Unlock()
		in <- &m.Record
	}
	return nil
}

// RefreshTopics forgets what is remembered about each topic of msgs, so
// that Publish looks it up afresh: a resend after the topic was created or
// the ACL granted must not meet an old failure.
func (p *Publisher) RefreshTopics(msgs []*Message) {
	for _, m := range msgs {
		p.topics.forget(m.Record.Topic)
	}
}

// collect reads producer's outcomes until the producer is closed.
func (p *Publisher) collect(producer sarama.AsyncProducer, collected chan struct{}) {
	defer close(collected)
	succ, errs := producer.Successes(), producer.Errors()
	for succ != nil || errs != nil {
		select {
		case r, ok := <-succ:
			if !ok {
				succ = nil
				continue
			}
			p.returned(r.Metadata.(*Message), Outcome{Result: Sent, Partition: r.Partition, Offset: r.Offset, At: time.Now()}, nil)
		case pe, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			p.failed(producer, pe.Msg.Metadata.(*Message), pe.Err)
		}
	}
}

// failed books a message producer gave back with err. An outage shuts
// the producer's fence first: it must deliver nothing more (fence.go).
func (p *Publisher) failed(producer sarama.AsyncProducer, m *Message, err error) {
	switch class, reason := classify(err); class {
	case classUnavailable:
		shutFence(producer)
		p.returned(m, Outcome{}, err)
	case classMessage:
		if reason == ReasonMessageTooLarge && !isClientSizeCheck(err) && !m.alone {
			// The broker judges the batch: try the message by itself
			// before calling it too large.
			p.resendAlone(m)
			return
		}
		// The client's own size check and an encoding error refuse the
		// record before it reaches a broker: never sent, no attempt.
		p.returned(m, Outcome{Result: Rejected, Reason: reason, Err: err, Unsent: isClientSizeCheck(err) || isEncoding(err)}, nil)
	default:
		p.returned(m, Outcome{Result: Failed, Err: err}, nil)
	}
}

// Close stops recovery, shuts the producer down and waits for its last
// outcomes; messages waiting to be resent get none.
func (p *Publisher) Close() error {
	p.stopping()
	p.mu.Lock()
	for p.recovering {
		p.cond.Wait()
	}
	producer, collected := p.producer, p.collected
	p.producer = nil
	p.mu.Unlock()
	var err error
	if producer != nil {
		err = producer.Close()
		<-collected
	}
	if p.dial != nil {
		err = errors.Join(err, p.dial.close())
	}
	return err
}
