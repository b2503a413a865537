package source

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

// The River and graphile-worker sources wake their pool when their system's
// own client inserts a job. It needs a PostgreSQL server with their schemas:
// test/e2e (TestPostgresSources) runs it inside its sandbox with
//
//	FLEXIQ_TEST_PG_URL      the server, password included
//	FLEXIQ_TEST_PG_INSERT_river, FLEXIQ_TEST_PG_INSERT_graphile-worker
//	                        a shell command inserting one job through that
//	                        system's own client.
func TestPostgresWatchInserts(t *testing.T) {
	url := os.Getenv("FLEXIQ_TEST_PG_URL")
	if url == "" {
		t.Skip("needs FLEXIQ_TEST_PG_URL: test/e2e runs this against PostgreSQL in its sandbox")
	}
	for _, typ := range []string{TypeRiver, TypeGraphileWorker} {
		t.Run(typ, func(t *testing.T) {
			src, err := New(pgSpec(typ, config.Conn{URL: url}))
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			if typ == TypeRiver {
				unguard(src).(*pgListeningPreset).channel = "river.river_insert" // the e2e test's River lives in schema river
			}
			w, ok := As[Watcher](src)
			if !ok {
				t.Fatalf("%s is no Watcher", typ)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			wakes := make(chan struct{}, 100)
			how, err := w.Watch(ctx, func() {
				select {
				case wakes <- struct{}{}:
				default:
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %s", typ, how)
			// The first wake-up is the connection's own.
			select {
			case <-wakes:
			case <-time.After(10 * time.Second):
				t.Fatal("not listening after 10 s")
			}
			out, err := exec.Command("sh", "-c", os.Getenv("FLEXIQ_TEST_PG_INSERT_"+typ)).CombinedOutput()
			if err != nil {
				t.Fatalf("inserting: %v\n%s", err, out)
			}
			select {
			case <-wakes:
			case <-time.After(5 * time.Second):
				t.Fatalf("no wake-up within 5 s of %s's own insert", typ)
			}
		})
	}
}
