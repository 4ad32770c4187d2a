// Package retry computes delays: how long to wait before trying again, for a
// dependency that is down and for an event whose delivery failed.
package retry

import (
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Reconnect returns the backoff used while a dependency (PostgreSQL, Kafka) is
// unreachable: exponential from initial, doubling, capped at max, with ±20 %
// jitter, and never giving up.
func Reconnect(initial, max time.Duration) backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = initial
	b.MaxInterval = max
	b.Multiplier = 2
	b.RandomizationFactor = 0.2
	b.MaxElapsedTime = 0
	b.Reset()
	return b
}
