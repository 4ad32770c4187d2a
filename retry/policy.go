package retry

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Policy kinds.
const (
	KindExponential = "exponential"
	KindFixed       = "fixed"
)

// Jitter modes.
const (
	JitterNone         = "none"
	JitterProportional = "proportional" // ±10 %
	JitterFull         = "full"         // uniform in [0, delay]
	JitterDecorrelated = "decorrelated" // uniform in [delay, 3 × previous delay], capped
)

// Defaults for Policy.
const (
	KindDefault        = KindExponential
	DelayDefault       = time.Second
	MaxDelayDefault    = time.Hour
	MaxAttemptsDefault = 5
	JitterDefault      = JitterProportional
)

// Policy says how long an event waits after a failed delivery attempt and how
// many attempts it gets. It is stored with the event's status row when the row
// is created, so configuration changes do not touch events in flight.
type Policy struct {
	// Kind is exponential (Delay, doubling, capped at MaxDelay) or fixed (Delay each time).
	Kind string `json:"kind"`
	// Delay is the wait after the first failure (exponential) or every failure (fixed).
	Delay time.Duration `json:"delay"`
	// MaxDelay caps an exponential wait.
	MaxDelay time.Duration `json:"max_delay"`
	// MaxAttempts is how many failed attempts make the event FAILED (RETRIES_EXHAUSTED).
	MaxAttempts int `json:"max_attempts"`
	// Jitter is none, proportional (±10 %), full or decorrelated.
	Jitter string `json:"jitter"`
}

// WithDefaults fills unset fields.
func (p Policy) WithDefaults() Policy {
	p.Kind = cmp.Or(p.Kind, KindDefault)
	p.Delay = cmp.Or(p.Delay, DelayDefault)
	p.MaxDelay = cmp.Or(p.MaxDelay, MaxDelayDefault)
	p.MaxAttempts = cmp.Or(p.MaxAttempts, MaxAttemptsDefault)
	p.Jitter = cmp.Or(p.Jitter, JitterDefault)
	return p
}

// Validate reports the first field that cannot work, naming its flag.
func (p Policy) Validate() error {
	switch {
	case p.Kind != KindExponential && p.Kind != KindFixed:
		return fmt.Errorf("--retry-policy: %q is not exponential or fixed", p.Kind)
	case p.Delay <= 0:
		return fmt.Errorf("--retry-delay must be positive")
	case p.MaxDelay < p.Delay:
		return fmt.Errorf("--retry-max-delay (%s) must be at least --retry-delay (%s)", p.MaxDelay, p.Delay)
	case p.MaxAttempts < 1:
		return fmt.Errorf("--retry-max-attempts must be at least 1")
	}
	switch p.Jitter {
	case JitterNone, JitterProportional, JitterFull, JitterDecorrelated:
		return nil
	}
	return fmt.Errorf("--retry-jitter: %q is not none, proportional, full or decorrelated", p.Jitter)
}

// Exhausted reports whether an event that has failed attempts times is done
// retrying.
func (p Policy) Exhausted(attempts int) bool { return attempts >= p.MaxAttempts }

// Base is the wait after the attempts-th failure before jitter: for
// exponential Delay·2^(attempts-1) capped at MaxDelay, for fixed Delay.
func (p Policy) Base(attempts int) time.Duration {
	if p.Kind == KindFixed || attempts <= 1 {
		return p.Delay
	}
	d := float64(p.Delay) * math.Pow(2, float64(attempts-1))
	if d >= float64(p.MaxDelay) {
		return p.MaxDelay
	}
	return time.Duration(d)
}

// Next is the wait after the attempts-th failure, with jitter drawn from rnd.
// prev is the wait before this attempt (decorrelated jitter uses it).
func (p Policy) Next(attempts int, prev time.Duration, rnd *rand.Rand) time.Duration {
	base := p.Base(attempts)
	switch p.Jitter {
	case JitterProportional:
		return time.Duration(float64(base) * (0.9 + 0.2*rnd.Float64()))
	case JitterFull:
		return time.Duration(rnd.Int64N(int64(base) + 1))
	case JitterDecorrelated:
		hi := max(3*prev, p.Delay)
		d := p.Delay + time.Duration(rnd.Int64N(int64(hi-p.Delay)+1))
		return min(d, p.MaxDelay)
	}
	return base
}

// stored is a Policy as outbox.deliveries.retry_policy keeps it.
type stored struct {
	Kind        string `json:"kind"`
	DelayMS     int64  `json:"delay_ms"`
	MaxDelayMS  int64  `json:"max_delay_ms"`
	MaxAttempts int    `json:"max_attempts"`
	Jitter      string `json:"jitter"`
}

// JSON is the policy as stored in outbox.deliveries.retry_policy.
func (p Policy) JSON() []byte {
	b, _ := json.Marshal(stored{p.Kind, p.Delay.Milliseconds(), p.MaxDelay.Milliseconds(), p.MaxAttempts, p.Jitter}) //nolint:errcheck // plain fields cannot fail
	return b
}

// ParsePolicy reads a stored policy; missing fields come from def.
func ParsePolicy(b []byte, def Policy) (Policy, error) {
	if len(b) == 0 {
		return def, nil
	}
	var v stored
	if err := json.Unmarshal(b, &v); err != nil {
		return def, fmt.Errorf("reading stored retry policy: %w", err)
	}
	p := Policy{Kind: v.Kind, Delay: time.Duration(v.DelayMS) * time.Millisecond,
		MaxDelay: time.Duration(v.MaxDelayMS) * time.Millisecond, MaxAttempts: v.MaxAttempts, Jitter: v.Jitter}
	p.Kind = cmp.Or(p.Kind, def.Kind)
	p.Delay = cmp.Or(p.Delay, def.Delay)
	p.MaxDelay = cmp.Or(p.MaxDelay, def.MaxDelay)
	p.MaxAttempts = cmp.Or(p.MaxAttempts, def.MaxAttempts)
	p.Jitter = cmp.Or(p.Jitter, def.Jitter)
	return p, p.Validate()
}
