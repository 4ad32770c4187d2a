package retry

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// schedule lists the waits after each failure until the policy gives up.
func schedule(p Policy, rnd *rand.Rand) []time.Duration {
	var out []time.Duration
	prev := time.Duration(0)
	for attempts := 1; !p.Exhausted(attempts); attempts++ {
		prev = p.Next(attempts, prev, rnd)
		out = append(out, prev)
	}
	return out
}

func TestPolicy_DocumentedSchedules(t *testing.T) {
	t.Parallel()
	s := time.Second
	cases := []struct {
		name   string
		policy Policy
		want   []time.Duration // waits after failures 1, 2, ...; FAILED after the last
	}{
		{"ExponentialDefault", Policy{Jitter: JitterNone, MaxAttempts: 6}, []time.Duration{1 * s, 2 * s, 4 * s, 8 * s, 16 * s}},
		{"ExponentialFiveAttempts", Policy{Jitter: JitterNone}, []time.Duration{1 * s, 2 * s, 4 * s, 8 * s}},
		{"ExponentialCapped", Policy{Jitter: JitterNone, MaxDelay: 5 * s, MaxAttempts: 6}, []time.Duration{1 * s, 2 * s, 4 * s, 5 * s, 5 * s}},
		{"Fixed", Policy{Kind: KindFixed, Jitter: JitterNone}, []time.Duration{1 * s, 1 * s, 1 * s, 1 * s}},
		{"SingleAttempt", Policy{MaxAttempts: 1}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := schedule(tc.policy.WithDefaults(), rand.New(rand.NewPCG(1, 1)))
			if len(got) != len(tc.want) {
				t.Fatalf("schedule %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("schedule %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestPolicy_JitterStaysInItsBandAndIsDeterministic(t *testing.T) {
	t.Parallel()
	for _, jitter := range []string{JitterProportional, JitterFull, JitterDecorrelated} {
		p := Policy{Jitter: jitter, MaxAttempts: 12}.WithDefaults()
		a := schedule(p, rand.New(rand.NewPCG(7, 7)))
		b := schedule(p, rand.New(rand.NewPCG(7, 7)))
		prev := time.Duration(0)
		for i, d := range a {
			if d != b[i] {
				t.Fatalf("%s: same seed gave %v and %v", jitter, a, b)
			}
			base := p.Base(i + 1)
			lo, hi := time.Duration(0), p.MaxDelay
			switch jitter {
			case JitterProportional:
				lo, hi = time.Duration(float64(base)*0.9), time.Duration(float64(base)*1.1)
			case JitterFull:
				hi = base
			case JitterDecorrelated:
				lo, hi = p.Delay, min(max(3*prev, p.Delay), p.MaxDelay)
			}
			if d < lo || d > hi {
				t.Fatalf("%s: wait %d = %s outside [%s, %s]", jitter, i+1, d, lo, hi)
			}
			prev = d
		}
	}
}

func TestPolicy_StoredFormRoundTrips(t *testing.T) {
	t.Parallel()
	p := Policy{Kind: KindFixed, Delay: 250 * time.Millisecond, MaxDelay: time.Minute, MaxAttempts: 9, Jitter: JitterFull}
	got, err := ParsePolicy(p.JSON(), Policy{}.WithDefaults())
	if err != nil || got != p {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, p)
	}
	if got, _ := ParsePolicy(nil, p); got != p {
		t.Fatalf("no stored policy: got %+v, want the default %+v", got, p)
	}
}

func TestPolicy_ValidateNamesTheFlag(t *testing.T) {
	t.Parallel()
	for flag, p := range map[string]Policy{
		"--retry-policy":       {Kind: "linear"},
		"--retry-max-delay":    {MaxDelay: time.Millisecond},
		"--retry-jitter":       {Jitter: "lots"},
		"--retry-max-attempts": {MaxAttempts: -1},
	} {
		err := p.WithDefaults().Validate()
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("Validate(%+v) = %v, want an error naming %s", p, err, flag)
		}
	}
}
