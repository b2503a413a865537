package source

import (
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/flexiqdb"
)

func TestPickThreads(t *testing.T) {
	now := time.UnixMilli(1_764_500_000_000)
	live := now.UnixMilli() - 1000
	stale := now.Add(-LiveWorkerWindow).UnixMilli() - 1
	edge := now.Add(-LiveWorkerWindow).UnixMilli()
	for _, tc := range []struct {
		name      string
		workers   []liveWorker
		queues    []string
		namespace string
		want      int
		ok        bool
	}{
		{"none", nil, nil, "", 0, false},
		{"one live", []liveWorker{{heartbeatMs: live, queues: "default", threads: 8}}, nil, "", 8, true},
		{"stale ignored", []liveWorker{{heartbeatMs: stale, threads: 8}}, nil, "", 0, false},
		{"heartbeat exactly 30 s ago counts", []liveWorker{{heartbeatMs: edge, threads: 6}}, nil, "", 6, true},
		{"zero threads ignored", []liveWorker{{heartbeatMs: live, threads: 0}}, nil, "", 0, false},
		{"fewest wins", []liveWorker{{heartbeatMs: live, threads: 8}, {heartbeatMs: live, threads: 2}, {heartbeatMs: stale, threads: 1}}, nil, "", 2, true},
		{"queue match", []liveWorker{{heartbeatMs: live, queues: "email,sms", threads: 3}, {heartbeatMs: live, queues: "video", threads: 1}}, []string{"sms"}, "", 3, true},
		{"queue with spaces", []liveWorker{{heartbeatMs: live, queues: "email, sms", threads: 3}}, []string{"sms"}, "", 3, true},
		{"no queues means default", []liveWorker{{heartbeatMs: live, queues: "", threads: 5}}, []string{"default"}, "", 5, true},
		{"no queue served", []liveWorker{{heartbeatMs: live, queues: "video", threads: 1}}, []string{"email"}, "", 0, false},
		{"namespace match", []liveWorker{{heartbeatMs: live, threads: 4, namespace: "acme", hasNS: true}, {heartbeatMs: live, threads: 1}}, nil, "acme", 4, true},
		{"namespace mismatch", []liveWorker{{heartbeatMs: live, threads: 4, namespace: "other", hasNS: true}}, nil, "acme", 0, false},
		{"default-namespace worker not in a namespaced pool", []liveWorker{{heartbeatMs: live, threads: 4}}, nil, "acme", 0, false},
		{"no namespace filter takes any", []liveWorker{{heartbeatMs: live, threads: 4, namespace: "x", hasNS: true}}, nil, "", 4, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := pickThreads(tc.workers, tc.queues, tc.namespace, now)
			if got != tc.want || ok != tc.ok {
				t.Errorf("pickThreads = %d, %v; want %d, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestPgJobFilter(t *testing.T) {
	for _, tc := range []struct {
		queues []string
		ns     string
		where  string
		args   int
	}{
		{nil, "", "", 0},
		{[]string{"a", "b"}, "", " AND queue = ANY($2::text[])", 1},
		{nil, "acme", " AND namespace = $2", 1},
		{[]string{"a"}, "acme", " AND queue = ANY($2::text[]) AND namespace = $3", 2},
	} {
		where, args := pgJobFilter(tc.queues, tc.ns, 2)
		if where != tc.where || len(args) != tc.args {
			t.Errorf("pgJobFilter(%v, %q) = %q, %d args; want %q, %d", tc.queues, tc.ns, where, len(args), tc.where, tc.args)
		}
	}
}

// flexiq-sqlite reads threads from its workers table, with or without a
// namespace column.
func TestFlexiqSQLiteThreads(t *testing.T) {
	path := t.TempDir() + "/q.db"
	db, err := flexiqdb.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Now()
	_, err = db.Exec(`INSERT INTO workers (worker_id, last_heartbeat, queues, status, threads) VALUES
		('a', ?1, 'email', 'active', 6), ('b', ?2, 'email', 'active', 1), ('c', ?1, 'video', 'active', 2)`,
		now.UnixMilli(), now.Add(-time.Minute).UnixMilli())
	if err != nil {
		t.Fatal(err)
	}
	src, err := New(config.Source{Type: TypeFlexiqSQLite, Settings: FlexiqSQLiteSettings{Path: path, Queues: []string{"email"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	tr, ok := As[ThreadsReporter](src)
	if !ok {
		t.Fatal("flexiq-sqlite is no ThreadsReporter")
	}
	if n, ok, err := tr.Threads(t.Context(), now); err != nil || !ok || n != 6 {
		t.Errorf("Threads = %d, %v, %v; want 6, true", n, ok, err)
	}
	if _, err := db.Exec(`ALTER TABLE workers ADD COLUMN namespace TEXT; UPDATE workers SET namespace = 'acme' WHERE worker_id = 'a'`); err != nil {
		t.Fatal(err)
	}
	ns, _ := New(config.Source{Type: TypeFlexiqSQLite, Settings: FlexiqSQLiteSettings{Path: path, Namespace: "other"}})
	defer ns.Close()
	if n, ok, err := mustAs[ThreadsReporter](t, ns).Threads(t.Context(), now); err != nil || ok {
		t.Errorf("Threads in namespace other = %d, %v, %v; want not ok", n, ok, err)
	}
}
