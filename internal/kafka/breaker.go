package kafka

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/IBM/sarama"
	"go.uber.org/zap"
)

// BreakerState is the state of the publisher's circuit breaker.
//
//	closed ──"unavailable" error──▶ open ──producer retired, backoff, new producer──▶ half-open
//	  ▲                              ▲                                                   │
//	  │                              └──────────────probe unavailable────────────────────┤
//	  └────────────probe delivered (then the rest is resent in order)────────────────────┘
//
// While it is not closed, or a recovery is resending what an outage sent
// back, Publish waits and nothing is handed to sarama but the resends.
type BreakerState int

// Breaker states.
const (
	BreakerClosed   BreakerState = iota // delivering
	BreakerOpen                         // cluster unavailable: nothing is sent
	BreakerHalfOpen                     // one probe message is out
)

func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half-open"
	}
	return "unknown"
}

// State is the breaker's state now.
func (p *Publisher) State() BreakerState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state
}

// enter moves the breaker to s, with p.mu held, and tells the listener.
func (p *Publisher) enter(s BreakerState) {
	if p.state == s {
		return
	}
	p.state = s
	if p.onState != nil {
		p.onState(s)
	}
}

// clear reports, with p.mu held, whether new messages may go: the breaker
// is closed and no recovery is under way (so nothing overtakes a resend).
func (p *Publisher) clear() bool {
	return p.state == BreakerClosed && len(p.resend) == 0 && !p.recovering
}

// wakeOnDone wakes p.cond's waiters when ctx ends; call the result to stop.
func (p *Publisher) wakeOnDone(ctx context.Context) func() bool {
	return context.AfterFunc(ctx, func() {
		p.mu.Lock()
		p.cond.Broadcast()
		p.mu.Unlock()
	})
}

// waitClosed waits, with p.mu held, until clear, deferring or ctx ends.
func (p *Publisher) waitClosed(ctx context.Context) error {
	if p.clear() || p.deferring {
		return nil
	}
	defer p.wakeOnDone(ctx)()
	for !p.clear() && !p.deferring && ctx.Err() == nil {
		p.cond.Wait()
	}
	return ctx.Err()
}

// waitIdle waits, with p.mu held, until nothing is in flight.
func (p *Publisher) waitIdle(ctx context.Context) error {
	for p.flying.n > 0 && ctx.Err() == nil {
		p.cond.Wait()
	}
	return ctx.Err()
}

// returned books a message sarama gave back. unavailable != nil puts it in
// line for resending and opens the breaker; otherwise out is its final
// outcome. A message Defer gave its outcome already only moves the breaker.
func (p *Publisher) returned(m *Message, out Outcome, unavailable error) {
	p.mu.Lock()
	p.flying.remove(m)
	report := !m.given
	if unavailable != nil {
		switch {
		case m.given:
		case p.deferring:
			m.Outcome = Outcome{Result: Deferred}
		default:
			p.resend = append(p.resend, m)
			report = false
		}
		switch p.state {
		case BreakerClosed:
			p.openedAt = time.Now()
			p.log.Warn("kafka unavailable: circuit breaker open, delivery paused; events are not failed", zap.Error(unavailable))
		case BreakerHalfOpen:
			p.log.Info("kafka still unavailable: circuit breaker open again", zap.Error(unavailable))
		}
		p.enter(BreakerOpen)
		p.startRecovery()
	} else {
		if report {
			m.Outcome = out
		}
		if p.state == BreakerHalfOpen {
			p.closeBreaker("probe delivered")
		}
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	if report {
		m.to.Done(m)
	}
}

// Defer switches what an outage does to messages. On: every message
// waiting to be resent, every message still in sarama's hands (unless the
// breaker has closed meanwhile, when they are about to arrive), every
// message sarama gives back as unavailable and every message Publish is
// given while the breaker is not closed gets the outcome Deferred at once
// instead of waiting for the cluster; the relay queues them (spill). The
// producer that saw the outage is fenced off (fence.go) and delivers
// nothing after that; a request it had written before may still have
// reached Kafka, so a message can arrive twice, never out of order: its
// first copy lands before anything the relay sends later. The breaker still
// recovers by itself: with nothing to resend, a new producer that connects
// closes it. Off: outages are waited out again.
func (p *Publisher) Defer(on bool) {
	p.mu.Lock()
	p.deferring = on
	var given []*Message
	if on {
		given, p.resend = p.resend, nil
		for m := p.flying.head; m != nil && p.state != BreakerClosed; m = m.next {
			if !m.given {
				m.given = true
				given = append(given, m)
			}
		}
		for _, m := range given {
			m.Outcome = Outcome{Result: Deferred}
		}
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	for _, m := range given {
		m.to.Done(m)
	}
}

// UnavailableFor is how long the breaker has been open (or half-open), and 0
// while it is closed.
func (p *Publisher) UnavailableFor() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == BreakerClosed {
		return 0
	}
	return time.Since(p.openedAt)
}

// resendAlone books a message to be sent again by itself.
func (p *Publisher) resendAlone(m *Message) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.flying.remove(m)
	if m.given {
		return // deferred already: the relay queued it
	}
	m.alone = true
	p.resend = append(p.resend, m)
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

// closeBreaker closes the breaker. Called with p.mu held.
func (p *Publisher) closeBreaker(why string) {
	if p.state == BreakerClosed {
		return
	}
	p.enter(BreakerClosed)
	p.backoff.Reset()
	p.log.Info("kafka recovered: circuit breaker closed", zap.String("why", why),
		zap.Duration("outage", time.Since(p.openedAt)), zap.Int("resending", len(p.resend)))
}

// recoverLoop runs recovery steps until the breaker is closed and every
// returned message is resent, or Close. One runs at a time, started by
// returned or resendAlone, so recovery goes on whether or not anyone
// publishes. It holds p.mu except where a step says it lets go.
func (p *Publisher) recoverLoop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	ctx := p.stopCtx
	defer p.wakeOnDone(ctx)()
	for (p.state != BreakerClosed || len(p.resend) > 0) && ctx.Err() == nil {
		// What is still in flight comes back before anything is resent, so
		// the resend keeps the original order. The producer that gave the
		// first message back as unavailable is fenced off (failed), so the
		// rest of what it holds comes back failed too, never delivered
		// behind an earlier message that waits for its resend.
		if p.waitIdle(ctx) != nil {
			break
		}
		if p.state != BreakerClosed {
			p.retire()
			if !p.reconnect(ctx) || !p.probe(ctx) {
				continue // still open: the next round waits longer
			}
		}
		if p.resendInOrder(ctx) != nil {
			break
		}
	}
	p.recovering = false
	p.cond.Broadcast()
}

// retire closes the producer that saw the outage, fenced off already and
// with nothing in flight: a new one starts with a new producer id, so no
// sequence state of the old one survives. It lets go
// of p.mu while the producer closes.
func (p *Publisher) retire() {
	if p.producer == nil {
		return
	}
	old, collected := p.producer, p.collected
	p.producer = nil
	p.mu.Unlock()
	if err := old.Close(); err != nil {
		p.log.Debug("closing kafka producer after an outage", zap.Error(err))
	}
	<-collected
	p.mu.Lock()
}

// reconnect waits the next backoff and connects a new producer, reporting
// whether it did. It lets go of p.mu meanwhile.
func (p *Publisher) reconnect(ctx context.Context) bool {
	d := p.backoff.NextBackOff()
	p.mu.Unlock()
	t := time.NewTimer(d)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	var producer sarama.AsyncProducer
	var err error
	if ctx.Err() == nil {
		producer, err = connectWithin(ctx, p.connect)
	}
	p.mu.Lock()
	p.lastErr = err
	var notKafka *NotKafkaError
	switch {
	case ctx.Err() != nil:
		if producer != nil {
			p.use(producer) // Close retires it
		}
		return false
	case isRefusal(err):
		// The cluster answers now and refuses this configuration: said
		// once per change, and tried again (credentials can be fixed on
		// the broker's side).
		if err.Error() != p.refusal {
			p.refusal = err.Error()
			p.log.Error("kafka refuses the relay's configuration; delivery stays paused until it accepts it", zap.Error(err))
		}
		return false
	case errors.As(err, &notKafka):
		// Said once per change, like a refusal: an address that is not
		// Kafka is a mistake a person must see, not a passing outage.
		if err.Error() != p.refusal {
			p.refusal = err.Error()
			p.log.Warn("kafka unavailable: a broker address is not a Kafka listener; retrying with backoff", zap.Error(err))
		}
		return false
	case err != nil:
		p.log.Debug("kafka still unavailable: could not connect a producer", zap.Error(err), zap.Duration("after", d))
		return false
	}
	p.refusal = ""
	p.warnSkipped()
	p.use(producer)
	return true
}

// probe sends the first message waiting to be resent, alone, on the new
// producer (half-open) and reports whether the breaker closed. With nothing
// to resend, the new producer closes the breaker at once.
func (p *Publisher) probe(ctx context.Context) bool {
	if len(p.resend) == 0 {
		p.closeBreaker("connected")
		return true
	}
	p.enter(BreakerHalfOpen)
	p.log.Info("kafka circuit breaker half-open: sending one probe message")
	slices.SortStableFunc(p.resend, func(a, b *Message) int { return cmp.Compare(a.seq, b.seq) })
	m := p.resend[0]
	p.resend = p.resend[1:]
	p.send(m)
	return p.waitIdle(ctx) == nil && p.state == BreakerClosed
}

// resendInOrder sends, on a closed breaker, every message waiting to be
// resent, in the order Publish was given them. A message to be tried alone
// goes with nothing else in flight.
func (p *Publisher) resendInOrder(ctx context.Context) error {
	msgs := p.resend
	p.resend = nil
	slices.SortStableFunc(msgs, func(a, b *Message) int { return cmp.Compare(a.seq, b.seq) })
	for i, m := range msgs {
		if m.alone {
			if err := p.waitIdle(ctx); err != nil {
				p.resend = append(p.resend, msgs[i:]...)
				return err
			}
		}
		p.send(m)
		if m.alone {
			if err := p.waitIdle(ctx); err != nil {
				p.resend = append(p.resend, msgs[i+1:]...)
				return err
			}
		}
	}
	return nil
}

// send hands m to the current producer. Called with p.mu held; it lets go
// while the producer's input takes m.
func (p *Publisher) send(m *Message) {
	p.flying.push(m)
	in := p.producer.Input()
	p.mu.Unlock()
	in <- &m.Record
	p.mu.Lock()
}

// warnSkipped says, when the connection left some seed brokers out, which
// and why. Called with p.mu held.
func (p *Publisher) warnSkipped() {
	if p.dial == nil {
		return
	}
	if err := p.dial.Skipped(); err != nil {
		p.log.Warn("kafka: connected, leaving out --kafka-brokers addresses that did not answer as Kafka; "+
			"check them", zap.Error(err))
	}
}
