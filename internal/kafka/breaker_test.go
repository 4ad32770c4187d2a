package kafka

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/cenkalti/backoff/v4"
	"go.uber.org/zap/zaptest"
)

// fakeProducer is a sarama.AsyncProducer the test drives by hand: it reads
// what the publisher sends (next) and answers each message (ok, fail).
type fakeProducer struct {
	sarama.AsyncProducer // the methods the publisher never calls
	in                   chan *sarama.ProducerMessage
	succ                 chan *sarama.ProducerMessage
	errs                 chan *sarama.ProducerError
	closed               chan struct{}
	once                 sync.Once
}

func newFakeProducer() *fakeProducer {
	return &fakeProducer{in: make(chan *sarama.ProducerMessage), succ: make(chan *sarama.ProducerMessage, 16),
		errs: make(chan *sarama.ProducerError, 16), closed: make(chan struct{})}
}

func (f *fakeProducer) Input() chan<- *sarama.ProducerMessage     { return f.in }
func (f *fakeProducer) Successes() <-chan *sarama.ProducerMessage { return f.succ }
func (f *fakeProducer) Errors() <-chan *sarama.ProducerError      { return f.errs }
func (f *fakeProducer) Close() error {
	f.once.Do(func() { close(f.succ); close(f.errs); close(f.closed) })
	return nil
}

// next returns the next message the publisher hands this producer.
func (f *fakeProducer) next(t *testing.T) *Message {
	t.Helper()
	select {
	case r := <-f.in:
		return r.Metadata.(*Message)
	case <-time.After(5 * time.Second):
		t.Fatal("the publisher sent nothing to the producer within 5s")
		return nil
	}
}

// idle fails the test if a message is waiting to be handed over now.
func (f *fakeProducer) idle(t *testing.T, why string) {
	t.Helper()
	select {
	case r := <-f.in:
		t.Fatalf("%s, but %q was sent", why, r.Value)
	default:
	}
}

func (f *fakeProducer) ok(m *Message, offset int64) {
	r := &m.Record
	r.Offset = offset
	f.succ <- r
}

func (f *fakeProducer) fail(m *Message, err error) {
	f.errs <- &sarama.ProducerError{Msg: &m.Record, Err: err}
}

// outcomes is a Receiver that hands each finished message to the test.
type outcomes chan *Message

func (o outcomes) Done(m *Message) { o <- m }

func (o outcomes) next(t *testing.T) *Message {
	t.Helper()
	select {
	case m := <-o:
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("no outcome within 5s")
		return nil
	}
}

type breakerBundle struct {
	pub       *Publisher
	first     *fakeProducer
	producers chan *fakeProducer // each one connect makes
	refuse    atomic.Int32       // connects still to fail
	out       outcomes
}

// setupBreaker gives a publisher on a fake producer whose replacements
// connect at once (zero backoff) unless refused.
func setupBreaker(t *testing.T) *breakerBundle {
	t.Helper()
	return setupBreakerOn(t, newFakeProducer(), 0)
}

// setupBreakerOn gives a publisher on first (nil: none, the cluster was not
// reached) whose next refused connects fail.
func setupBreakerOn(t *testing.T, first *fakeProducer, refused int32) *breakerBundle {
	t.Helper()
	b := &breakerBundle{first: first, producers: make(chan *fakeProducer, 8), out: make(outcomes, 16)}
	b.refuse.Store(refused)
	connect := func(context.Context) (sarama.AsyncProducer, error) {
		if b.refuse.Add(-1) >= 0 {
			return nil, sarama.ErrOutOfBrokers
		}
		f := newFakeProducer()
		b.producers <- f
		return f, nil
	}
	topics := func(string) ([]int32, error) { return []int32{0}, nil }
	var producer sarama.AsyncProducer // a nil *fakeProducer is not a nil interface
	if first != nil {
		producer = first
	}
	b.pub = newPublisher(producer, connect, topics, &backoff.ZeroBackOff{}, zaptest.NewLogger(t))
	t.Cleanup(func() {
		if err := b.pub.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

func (b *breakerBundle) nextProducer(t *testing.T) *fakeProducer {
	t.Helper()
	select {
	case f := <-b.producers:
		return f
	case <-time.After(5 * time.Second):
		t.Fatal("no new producer connected within 5s")
		return nil
	}
}

// publish hands messages with the given values over in the background.
func (b *breakerBundle) publish(t *testing.T, values ...string) []*Message {
	t.Helper()
	msgs := make([]*Message, len(values))
	for i, v := range values {
		msgs[i] = &Message{}
		if err := msgs[i].Build(Event{Topic: "t", Value: []byte(v)}); err != nil {
			t.Fatal(err)
		}
	}
	go func() {
		if err := b.pub.Publish(context.Background(), msgs, b.out); err != nil {
			t.Errorf("Publish: %v", err)
		}
	}()
	return msgs
}

func (b *breakerBundle) waitState(t *testing.T, want BreakerState) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for b.pub.State() != want {
		if time.Now().After(deadline) {
			t.Fatalf("breaker is %s, want %s", b.pub.State(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitRefusals waits until the cluster has refused n more connections.
func (b *breakerBundle) waitRefusals(t *testing.T, n int32) {
	t.Helper()
	left := b.refuse.Load() - n
	deadline := time.Now().Add(5 * time.Second)
	for b.refuse.Load() > left {
		if time.Now().After(deadline) {
			t.Fatalf("%d more connections refused within 5s, want %d", left+n-b.refuse.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func value(m *Message) string { return string(m.Record.Value.(sarama.ByteEncoder)) }

func expectSent(t *testing.T, f *fakeProducer, want string) *Message {
	t.Helper()
	m := f.next(t)
	if got := value(m); got != want {
		t.Fatalf("producer got %q, want %q", got, want)
	}
	return m
}

func TestBreaker_OpensOnAnOutageThenProbesAloneAndResendsTheRestInOrder(t *testing.T) {
	t.Parallel()
	b := setupBreaker(t)
	b.publish(t, "a", "b", "c")
	a, bm, c := expectSent(t, b.first, "a"), expectSent(t, b.first, "b"), expectSent(t, b.first, "c")

	b.first.fail(a, sarama.ErrOutOfBrokers)
	b.waitState(t, BreakerOpen)
	if b.pub.Available() {
		t.Fatal("Available with the breaker open")
	}
	b.publish(t, "d") // must wait for the resends
	b.first.fail(bm, sarama.ErrNotConnected)
	b.first.ok(c, 3) // a final outcome during the outage stands
	if m := b.out.next(t); value(m) != "c" || m.Outcome.Result != Sent {
		t.Fatalf("outcome %q %+v, want c Sent", value(m), m.Outcome)
	}

	second := b.nextProducer(t)
	<-b.first.closed // the producer that saw the outage is retired
	probe := expectSent(t, second, "a")
	if s := b.pub.State(); s != BreakerHalfOpen {
		t.Fatalf("breaker is %s while the probe is out, want half-open", s)
	}
	second.idle(t, "only the probe may be out while half-open")
	second.ok(probe, 1)
	second.ok(expectSent(t, second, "b"), 2)
	second.ok(expectSent(t, second, "d"), 4)
	for _, want := range []string{"a", "b", "d"} {
		if m := b.out.next(t); value(m) != want || m.Outcome.Result != Sent {
			t.Fatalf("outcome %q %+v, want %s Sent", value(m), m.Outcome, want)
		}
	}
	if s := b.pub.State(); s != BreakerClosed {
		t.Fatalf("breaker is %s after the resend, want closed", s)
	}
}

func TestBreaker_AFailedProbeOpensAgainAndRetiresThatProducerToo(t *testing.T) {
	t.Parallel()
	b := setupBreaker(t)
	b.publish(t, "a")
	b.first.fail(expectSent(t, b.first, "a"), sarama.ErrOutOfBrokers)

	second := b.nextProducer(t)
	second.fail(expectSent(t, second, "a"), sarama.ErrLeaderNotAvailable)
	third := b.nextProducer(t)
	<-second.closed
	third.ok(expectSent(t, third, "a"), 7)
	if m := b.out.next(t); m.Outcome.Result != Sent || m.Outcome.Offset != 7 {
		t.Fatalf("outcome %+v, want Sent at offset 7", m.Outcome)
	}
	b.waitState(t, BreakerClosed)
}

func TestBreaker_StaysOpenWhileNoProducerConnects(t *testing.T) {
	t.Parallel()
	b := setupBreaker(t)
	b.refuse.Store(3)
	b.publish(t, "a")
	b.first.fail(expectSent(t, b.first, "a"), sarama.ErrOutOfBrokers)
	second := b.nextProducer(t) // after three refusals
	if got := b.refuse.Load(); got >= 0 {
		t.Fatalf("a producer connected with %d refusals left", got+1)
	}
	second.ok(expectSent(t, second, "a"), 1)
	b.out.next(t)
	b.waitState(t, BreakerClosed)
}

func TestBreaker_MessageErrorsAreFinalAndDoNotOpenIt(t *testing.T) {
	t.Parallel()
	b := setupBreaker(t)
	b.publish(t, "too-large", "bad", "flaky")
	large, bad, flaky := expectSent(t, b.first, "too-large"), expectSent(t, b.first, "bad"), expectSent(t, b.first, "flaky")
	b.first.fail(bad, sarama.ErrTopicAuthorizationFailed)
	b.first.fail(flaky, sarama.ErrInvalidMessage)
	b.first.fail(large, sarama.ErrMessageSizeTooLarge) // the broker judged its batch
	// Tried again alone on the same producer, then too large for good.
	b.first.fail(expectSent(t, b.first, "too-large"), sarama.ErrMessageSizeTooLarge)
	got := map[string]Outcome{}
	for range 3 {
		m := b.out.next(t)
		got[value(m)] = m.Outcome
	}
	if o := got["bad"]; o.Result != Rejected || o.Reason != ReasonUnauthorizedOnTopic {
		t.Errorf("bad: %+v, want Rejected UNAUTHORIZED_ON_TOPIC", o)
	}
	if o := got["flaky"]; o.Result != Failed || !errors.Is(o.Err, sarama.ErrInvalidMessage) {
		t.Errorf("flaky: %+v, want Failed with the broker's error", o)
	}
	if o := got["too-large"]; o.Result != Rejected || o.Reason != ReasonMessageTooLarge {
		t.Errorf("too-large: %+v, want Rejected MESSAGE_TOO_LARGE after a try alone", o)
	}
	select {
	case f := <-b.producers:
		t.Fatalf("a new producer %p was connected for message errors", f)
	default:
	}
	if s := b.pub.State(); s != BreakerClosed {
		t.Fatalf("breaker is %s, want closed", s)
	}
}

func TestBreaker_PublishGivesUpWhenItsContextEndsDuringAnOutage(t *testing.T) {
	t.Parallel()
	b := setupBreaker(t)
	b.refuse.Store(1 << 30) // the cluster never comes back
	b.publish(t, "a")
	b.first.fail(expectSent(t, b.first, "a"), sarama.ErrOutOfBrokers)
	b.waitState(t, BreakerOpen)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		m := &Message{}
		_ = m.Build(Event{Topic: "t", Value: []byte("b")})
		errc <- b.pub.Publish(ctx, []*Message{m}, b.out)
	}()
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Publish returned %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Publish still waits 5s after its context ended")
	}
}

func TestBreaker_StartsOpenWhenTheClusterIsUnreachableAndClosesOnceAProducerConnects(t *testing.T) {
	t.Parallel()
	// The publisher reconnects in the background as soon as it is made
	// (with no backoff here), so the cluster stays unreachable until the
	// test has looked: a small refusal count raced the first assertion.
	b := setupBreakerOn(t, nil, 1<<30)
	if s := b.pub.State(); s != BreakerOpen {
		t.Fatalf("breaker is %s without a producer, want open", s)
	}
	if b.pub.UnavailableFor() <= 0 {
		t.Fatal("UnavailableFor is 0 with the breaker open since the start")
	}
	b.publish(t, "a") // waits for the connection
	b.waitRefusals(t, 3)
	select {
	case m := <-b.out:
		t.Fatalf("outcome %+v while no producer could connect", m.Outcome)
	default:
	}
	if s := b.pub.State(); s != BreakerOpen {
		t.Fatalf("breaker is %s while every connection is refused, want open", s)
	}
	b.refuse.Store(2) // two more refusals, then the cluster answers
	first := b.nextProducer(t)
	first.ok(expectSent(t, first, "a"), 1)
	if m := b.out.next(t); m.Outcome.Result != Sent {
		t.Fatalf("outcome %+v, want Sent", m.Outcome)
	}
	b.waitState(t, BreakerClosed)
}

func TestBreaker_DeferGivesWhatSaramaStillHoldsItsOutcomeAtOnceAndNeverASecond(t *testing.T) {
	t.Parallel()
	b := setupBreaker(t)
	b.refuse.Store(1 << 30) // no new producer until the test says so
	b.publish(t, "a", "b")
	a, held := expectSent(t, b.first, "a"), expectSent(t, b.first, "b")
	b.first.fail(a, sarama.ErrOutOfBrokers)
	b.waitState(t, BreakerOpen)

	b.pub.Defer(true) // "b" is still in sarama's hands
	got := map[string]Result{}
	for range 2 {
		m := b.out.next(t)
		got[value(m)] = m.Outcome.Result
	}
	if got["a"] != Deferred || got["b"] != Deferred {
		t.Fatalf("outcomes %v, want a and b Deferred", got)
	}

	// Sarama delivers "b" after all: the relay has queued it already, so
	// the publisher says nothing more of it, and only then retires the
	// producer that saw the outage.
	b.first.ok(held, 9)
	b.refuse.Store(0)
	second := b.nextProducer(t)
	<-b.first.closed
	b.waitState(t, BreakerClosed) // nothing to resend
	if n := len(b.out); n != 0 {
		t.Fatalf("%d more outcomes after Defer gave them all", n)
	}
	if held.Outcome.Result != Deferred {
		t.Fatalf("b's outcome became %+v after it was reported Deferred", held.Outcome)
	}
	second.idle(t, "nothing was left to resend")
}
