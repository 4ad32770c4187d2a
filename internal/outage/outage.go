// Package outage logs a dependency (PostgreSQL, Kafka) going down once and
// its recovery once, and retries an operation with backoff while it is down.
package outage

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/outbox-relay/outbox-relay/retry"
)

// Log logs one dependency's outages. The stages of a session share one, so
// it is safe for concurrent use.
type Log struct {
	log   *zap.Logger
	what  string
	mu    sync.Mutex
	down  bool
	since time.Time
	last  error // the last failure while down
}

// New returns a Log for the dependency named what.
func New(log *zap.Logger, what string) *Log { return &Log{log: log, what: what} }

// Failed records a failed attempt: a warning for the first, debug after.
func (o *Log) Failed(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.last = err
	if o.down {
		o.log.Debug(o.what+" still unavailable", zap.Error(err))
		return
	}
	o.down, o.since = true, time.Now()
	o.log.Warn(o.what+" unavailable; retrying with backoff", zap.Error(err))
}

// Recovered records a success, logging the recovery if it was down.
func (o *Log) Recovered() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.last = nil
	if o.down {
		o.down = false
		o.log.Info(o.what+" recovered", zap.Duration("outage", time.Since(o.since).Round(time.Millisecond)))
	}
}

// Down reports whether the dependency is down: failed since it last
// recovered.
func (o *Log) Down() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.down
}

// Why is the last failure while the dependency is down, or nil.
func (o *Log) Why() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.last
}

// Retry runs op until it succeeds or ctx ends (returning ctx's error),
// backing off in between and recording each result on o.
func Retry(ctx context.Context, o *Log, op func(context.Context) error) error {
	bo := retry.Reconnect(100*time.Millisecond, 10*time.Second)
	for {
		err := op(ctx)
		if err == nil {
			o.Recovered()
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		o.Failed(err)
		if !Sleep(ctx, bo.NextBackOff()) {
			return ctx.Err()
		}
	}
}

// Sleep waits d or until ctx ends, reporting whether ctx is still alive.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
