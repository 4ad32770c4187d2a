package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"
)

// wakeEnv, set to a rate, makes the bench binary a wake-up floor process
// (see wakeFloors) instead of the bench.
const wakeEnv = "OUTBOX_BENCH_WAKES"

// wakeChild, in a process started by wakeFloors, wakes rate times a second
// and does nothing else, until it is killed.
func wakeChild(rate string) error {
	n, err := strconv.Atoi(rate)
	if err != nil || n < 1 {
		return fmt.Errorf("%s: %q is not a rate", wakeEnv, rate)
	}
	for range time.Tick(time.Second / time.Duration(n)) { //nolint:revive // the ticker lives as long as the process
	}
	return nil
}

// wakeFloors measures, for each fixed rate of rates, what a Go process with
// one thread for Go code (as the relay runs in the bench) costs on this
// machine when all it does is wake up rate times a second: the CPU of the
// wake-ups alone, the floor under any relay that wakes up once per event.
func (b *bench) wakeFloors(ctx context.Context, rates []int) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	for _, rate := range fixed(rates) {
		phase := fmt.Sprintf("Go process woken @ %d/s", rate)
		fmt.Fprintln(os.Stderr, phase)
		cmd := exec.CommandContext(ctx, self)
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", wakeEnv, rate), "GOMAXPROCS=1")
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("starting the wake-up floor process: %w", err)
		}
		time.Sleep(b.o.warmup)
		cpu0, t0 := cpuSeconds(cmd.Process.Pid), time.Now()
		time.Sleep(b.o.steady)
		cpu1, secs := cpuSeconds(cmd.Process.Pid), time.Since(t0).Seconds()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		wakes := int(float64(rate) * secs) // the ticker's, over the measured window
		b.res = append(b.res, Result{Phase: phase, Events: wakes, Seconds: secs, EventsPerS: float64(rate), TargetRate: rate,
			CPUPerEvent: perEvent(cpu1-cpu0, wakes),
			Description: "a Go process (GOMAXPROCS=1) that only wakes up this many times a second, from a ticker; " +
				"CPU per wake-up: the floor under any relay that wakes once per event at this rate"})
	}
	return nil
}
