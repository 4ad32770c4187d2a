package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync"
)

// stallDrains repeats the relay's drain of the same number of events n
// times and counts the drains in which the relay's stream went silent: the
// drain stall of issue 20, which the stream's watchdog ends after
// --replication-timeout and logs. It prints each drain and the count.
func (b *bench) stallDrains(ctx context.Context, n int) error {
	var silent silenceCounter
	b.relayLog = &silent
	stalls, slowest := 0, 0.0
	for i := range n {
		end, err := b.backlog(ctx, b.o.events, "bench_relay")
		if err != nil {
			return err
		}
		before := silent.count()
		res, err := b.relayDrain(ctx, b.o.events, end, 1)
		if err != nil {
			return fmt.Errorf("drain %d: %w", i+1, err)
		}
		stalled := silent.count() > before
		if stalled {
			stalls++
		}
		slowest = max(slowest, res.Seconds)
		fmt.Fprintf(os.Stderr, "drain %d of %d: %d events in %.1f s (%.0f/s), stalled: %v\n",
			i+1, n, res.Events, res.Seconds, res.EventsPerS, stalled)
		if err := b.exec(ctx, `TRUNCATE outbox.events CASCADE`); err != nil {
			return err
		}
	}
	fmt.Printf("relay drains of %d events: %d in a row, %d stalled (the stream went silent), slowest %.1f s\n",
		b.o.events, n, stalls, slowest)
	return nil
}

// silenceCounter passes the relay's log through to stderr and counts the
// lines in which the stream's watchdog reports a silent connection.
type silenceCounter struct {
	mu      sync.Mutex
	partial []byte
	n       int
}

var silenceMark = []byte("went silent")

func (c *silenceCounter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.partial = append(c.partial, p...)
	for {
		i := bytes.IndexByte(c.partial, '\n')
		if i < 0 {
			break
		}
		if bytes.Contains(c.partial[:i], silenceMark) {
			c.n++
		}
		c.partial = c.partial[i+1:]
	}
	return os.Stderr.Write(p)
}

func (c *silenceCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}
