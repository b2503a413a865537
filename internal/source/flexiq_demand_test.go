package source

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/flexiqdb"
)

// The flexiq-sqlite source reads the arrival rate from created_at and the
// service time from started_at and completed_at, over the window, within
// the pool's queues and namespace.
func TestFlexiqSQLiteDemand(t *testing.T) {
	now := time.Now().Truncate(time.Millisecond)
	path, db := newDB(t)
	ms := func(ago time.Duration) int64 { return now.Add(-ago).UnixMilli() }
	var id int
	insert := func(queue string, status int, created time.Duration, started, completed *int64) {
		t.Helper()
		id++
		var s, c sql.NullInt64
		if started != nil {
			s = sql.NullInt64{Int64: *started, Valid: true}
		}
		if completed != nil {
			c = sql.NullInt64{Int64: *completed, Valid: true}
		}
		if _, err := db.Exec(`INSERT INTO jobs (id, queue, status, created_at, scheduled_at, started_at, completed_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, id, queue, status, ms(created), ms(created), s, c); err != nil {
			t.Fatal(err)
		}
	}
	p := func(v int64) *int64 { return &v }
	// In the last 60 s: 6 arrivals on queue a (3 pending, 1 running, 2
	// done taking 2 s and 4 s) and one on b (done, 10 s).
	for range 3 {
		insert("a", flexiqdb.StatusPending, 10*time.Second, nil, nil)
	}
	insert("a", flexiqdb.StatusRunning, 20*time.Second, p(ms(15*time.Second)), nil)
	insert("a", flexiqdb.StatusComplete, 30*time.Second, p(ms(25*time.Second)), p(ms(23*time.Second)))
	insert("a", flexiqdb.StatusFailed, 50*time.Second, p(ms(45*time.Second)), p(ms(41*time.Second)))
	insert("b", flexiqdb.StatusComplete, 40*time.Second, p(ms(30*time.Second)), p(ms(20*time.Second)))
	// Before the window: an arrival, and a job that finished long ago.
	insert("a", flexiqdb.StatusComplete, 5*time.Minute, p(ms(4*time.Minute)), p(ms(3*time.Minute)))
	// Cancelled before it ran: an arrival, no service time.
	insert("a", flexiqdb.StatusCancelled, 5*time.Second, nil, p(ms(4*time.Second)))

	tests := []struct {
		name   string
		queues []string
		window time.Duration
		want   Demand
	}{
		{"all queues", nil, time.Minute, Demand{ArrivalRate: 8.0 / 60, ServiceTime: 16 * time.Second / 3, Known: true}},
		{"queue a", []string{"a"}, time.Minute, Demand{ArrivalRate: 7.0 / 60, ServiceTime: 3 * time.Second, Known: true}},
		{"nothing finished in the window", []string{"a"}, 12 * time.Second, Demand{ArrivalRate: 4.0 / 12}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := mustNew(t, config.Source{Type: TypeFlexiqSQLite, Settings: FlexiqSQLiteSettings{Path: path, Queues: tt.queues}})
			got, err := mustAs[DemandReader](t, src).Demand(context.Background(), now, tt.window)
			if err != nil {
				t.Fatal(err)
			}
			if diff := got.ArrivalRate - tt.want.ArrivalRate; diff > 1e-9 || diff < -1e-9 ||
				got.Known != tt.want.Known || (got.ServiceTime-tt.want.ServiceTime).Abs() > time.Millisecond {
				t.Errorf("Demand = %+v, want %+v", got, tt.want)
			}
		})
	}

	src := mustNew(t, config.Source{Type: TypeFlexiqSQLite, Settings: FlexiqSQLiteSettings{Path: path + ".missing"}})
	_, err := mustAs[DemandReader](t, src).Demand(context.Background(), now, time.Minute)
	wantErrContaining(t, err, TypeFlexiqSQLite, path+".missing", "reading arrivals and service times")
}
