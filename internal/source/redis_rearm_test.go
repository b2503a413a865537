package source

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

// fakeRedisQueue answers an rq source's reads (an empty queue) and its
// watcher's (keyspace notifications on, subscriptions confirmed).
func fakeRedisQueue(cmd []string) (string, []byte, int64) {
	bulk := func(s string) string { return fmt.Sprintf("$%d\r\n%s\r\n", len(s), s) }
	switch strings.ToUpper(cmd[0]) {
	case "EXISTS":
		return ":0\r\n", nil, 0
	case "TYPE":
		return "+none\r\n", nil, 0
	case "CONFIG":
		return "*2\r\n" + bulk("notify-keyspace-events") + bulk("KA"), nil, 0
	case "SUBSCRIBE":
		var out strings.Builder
		for i, ch := range cmd[1:] {
			fmt.Fprintf(&out, "*3\r\n%s%s:%d\r\n", bulk("subscribe"), bulk(ch), i+1)
		}
		return out.String(), nil, 0
	case "PING":
		return "*2\r\n" + bulk("pong") + bulk(""), nil, 0
	}
	return "-ERR unknown command\r\n", nil, 0
}

// Issue 17, item 16: after the server comes back, the watcher subscribes
// again at the source's first good read, not when its backoff (here a
// minute, as after a long outage's doublings) runs out, and the journal
// hears of the loss and of the return.
func TestRedisWatchRearmedByObserve(t *testing.T) {
	defer func(lo, hi time.Duration) { watchBackoffMin, watchBackoffMax = lo, hi }(watchBackoffMin, watchBackoffMax)
	watchBackoffMin, watchBackoffMax = time.Minute, time.Hour

	srv := startFakeRedis(t, "127.0.0.1:0", fakeRedisQueue)
	addr := srv.addr
	src := mustNew(t, config.Source{Type: TypeRQ, Settings: RQSettings{Conn: config.Conn{URL: srv.url()}, Queues: []string{"q"}}})
	defer src.Close()

	var mu sync.Mutex
	var lost []error
	restored := make(chan string, 4)
	ctx, cancel := context.WithCancel(WithWatchEvents(context.Background(), WatchEvents{
		Lost:     func(err error) { mu.Lock(); lost = append(lost, err); mu.Unlock() },
		Restored: func(how string) { restored <- how },
	}))
	defer cancel()
	wakes := make(chan struct{}, 16)
	if _, err := mustAs[Watcher](t, src).Watch(ctx, func() {
		select {
		case wakes <- struct{}{}:
		default:
		}
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wakes: // subscribed
	case <-time.After(5 * time.Second):
		t.Fatal("the watcher never subscribed")
	}
	if _, err := src.Observe(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}

	srv.stop() // the outage
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(lost)
		mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the loss of the subscription was not reported")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := src.Observe(ctx, time.Now()); err == nil {
		t.Fatal("Observe succeeded with the server down")
	}
	startFakeRedis(t, addr, fakeRedisQueue) // back, on the same address
	for len(wakes) > 0 {
		<-wakes
	}
	// go-redis answers with its last dial error, without dialling, until
	// its own background dial (once a second) finds the server back: poll
	// as the pool does, until a read succeeds.
	var start time.Time
	for tries := 0; ; tries++ {
		_, err := src.Observe(ctx, time.Now())
		if err == nil {
			start = time.Now()
			break
		}
		if tries == 50 {
			t.Fatalf("Observe with the server back: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	select {
	case how := <-restored:
		if !strings.Contains(how, "keyspace notifications on redis://"+addr) {
			t.Errorf("restored report %q", how)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("wake-up not active again 5 s after the first good read (the backoff is a minute)")
	}
	select {
	case <-wakes: // the resubscription's wake-up: what arrived meanwhile is read
	case <-time.After(5 * time.Second):
		t.Error("no wake-up after subscribing again")
	}
	t.Logf("wake-up active again %v after the first good read", time.Since(start).Round(time.Millisecond))
}
