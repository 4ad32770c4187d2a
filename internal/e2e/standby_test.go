package e2e

import (
	"syscall"
	"testing"
	"time"
)

func TestStandby_TakesOverWithinSecondsWhenTheActiveRelayIsKilled(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "orders:3")
	active := e.relay(t, "--instance-id", "active")
	standby := e.startRelay(t, "--instance-id", "standby")
	standby.waitLog(t, "standby: replication slot", 30*time.Second)
	activeWalsender := e.slotPID(t)

	stop := make(chan struct{})
	written := writer(t, e, stop, 1<<30)
	time.Sleep(time.Second) // a steady writer before the kill
	killed := time.Now()
	active.signal(t, syscall.SIGKILL)
	active.wait(t, 10*time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if pid := e.slotPID(t); pid != 0 && pid != activeWalsender { // START_REPLICATION accepted
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no relay streams 30s after the active one was killed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	takeover := time.Since(killed)
	time.Sleep(time.Second) // the writer goes on against the new active relay
	close(stop)
	total := <-written
	dups := deliveredOnce(t, e, total)
	report(t, "active relay SIGKILLed under a steady writer: the standby held the slot %s later; %d events, 0 lost, %d duplicates",
		takeover.Round(time.Millisecond), total, dups)
	if takeover > 10*time.Second {
		t.Errorf("takeover took %s, want under 10s", takeover)
	}
	standby.waitLog(t, "streaming: the slot is consistent", 30*time.Second)
}
