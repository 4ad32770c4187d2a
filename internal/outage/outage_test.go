package outage

import (
	"errors"
	"sync"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestLog_LogsOnceWhenStagesFailTogether(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zap.InfoLevel)
	o := New(zap.New(core), "postgres")
	var wg sync.WaitGroup
	for range 8 { // the stages of a session report on one outage
		wg.Add(1)
		go func() {
			defer wg.Done()
			o.Failed(errors.New("connection refused"))
		}()
	}
	wg.Wait()
	o.Recovered()
	o.Recovered()
	if got := logs.FilterMessage("postgres unavailable; retrying with backoff").Len(); got != 1 {
		t.Errorf("outage logged %d times, want once", got)
	}
	if got := logs.FilterMessage("postgres recovered").Len(); got != 1 {
		t.Errorf("recovery logged %d times, want once", got)
	}
}
