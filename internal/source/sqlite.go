package source

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/flexiq/flexiq-scaled/internal/config"
	// Registers the "sqlite" driver; pure Go, so CGO_ENABLED=0 builds work.
	_ "modernc.org/sqlite"
)

// busyTimeoutMs bounds how long one Observe waits for a lock. A writer
// holding the database (only possible outside WAL mode) then costs a tick,
// not a hung controller.
const busyTimeoutMs = 2000

// readOnlyDSN opens path so that nothing can write through the connection,
// not even the user's sqlite-query: mode=ro makes SQLite open the file
// read-only (and refuse to create a missing one, where the driver's default
// flags would create an empty file), and query_only rejects writing
// statements before they run.
//
// Reading a WAL database that no flexiq process has open still creates its
// -wal and -shm files, as any SQLite reader must; running as root, SQLite
// gives them the database file's owner, so workers can still open them.
func readOnlyDSN(path string) string {
	return fmt.Sprintf("file:%s?mode=ro&_pragma=busy_timeout(%d)&_pragma=query_only(1)",
		escapePath(path), busyTimeoutMs)
}

// escapePath makes path safe to embed in a "file:" URI. SQLite decodes %HH
// in the path, and the driver splits its own parameters at the first '?', so
// those characters (and '#', the fragment marker) must not appear literally.
func escapePath(path string) string {
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
}

// readOnce opens the database, lets read run its statement, and closes the
// database again before returning.
//
// Opening per Observe rather than keeping a pooled connection costs about a
// quarter of a millisecond more (see BenchmarkObserve), which is nothing at
// one tick a second, and buys three things: no connection can pin a WAL
// snapshot between ticks and starve flexiq's checkpoints; a database that
// appears after New is picked up; and one that is deleted and recreated is
// read afresh instead of through a descriptor to the unlinked file.
func readOnce(ctx context.Context, kind, path string, read func(context.Context, *sql.DB) error) error {
	db, err := sql.Open("sqlite", readOnlyDSN(path))
	if err != nil {
		return fmt.Errorf("%s source %s: %w", kind, path, err)
	}
	defer db.Close()
	if err := read(ctx, db); err != nil {
		// SQLite says only "unable to open database file"; say why.
		if _, statErr := os.Stat(path); errors.Is(statErr, fs.ErrNotExist) {
			return fmt.Errorf("%s source %s: database does not exist (yet): %w", kind, path, err)
		}
		return fmt.Errorf("%s source %s: %w", kind, path, err)
	}
	return nil
}

// pathKey documents the database key both SQLite types take.
var pathKey = config.KeyDoc{Name: "path", Type: "string", Required: true,
	Limits: "absolute path; not under /tmp, /var/tmp, /home, /root or /run/user, as written or through symlinks",
	Doc:    "The SQLite database file. It need not exist yet (a warning): the pool holds at its current size until it appears."}

// decodePath reads the database key: an absolute path the daemon can see.
func decodePath(d *config.SourceDecoder, dst *string) {
	d.LocalFile("path", "the database file to read", dst)
}

// sqliteDoc opens the reference's table of each SQLite type.
const sqliteDoc = "The database is opened read-only afresh on every tick. If it cannot be read " +
	"(missing file, lock timeout, bad query), the tick is a hold: the pool stays at its current size."
