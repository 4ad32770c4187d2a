package kafka

import (
	"errors"
	"net"
	"testing"
	"time"
)

func TestFence_ShutResetsEveryConnectionAndRefusesNewOnes(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	nd := &net.Dialer{Timeout: time.Second}
	f := newFence(nd.Dial)
	conn, err := f.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dialing through an open fence: %v", err)
	}
	if d := f.backoff(100*time.Millisecond)(1, 3); d != 100*time.Millisecond {
		t.Fatalf("retry backoff %s through an open fence, want sarama's 100ms", d)
	}

	f.Shut()
	if _, err := conn.Write([]byte("late produce request")); err == nil {
		t.Fatal("a connection of a fenced producer still writes")
	}
	if _, err := f.Dial("tcp", ln.Addr().String()); !errors.Is(err, errFenced) {
		t.Fatalf("dialing through a shut fence: %v, want errFenced", err)
	}
	if class, _ := classify(&net.OpError{Op: "dial", Net: "tcp", Err: errFenced}); class != classUnavailable {
		t.Fatalf("a fenced dial classifies as %v, want unavailable (resent, not failed)", class)
	}
	if d := f.backoff(100*time.Millisecond)(1, 3); d != 0 {
		t.Fatalf("retry backoff %s through a shut fence, want 0: its retries cannot succeed", d)
	}
}
