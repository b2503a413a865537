package conn

import (
	"net/url"
	"regexp"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

// PostgresMaxMessage bounds one message from a PostgreSQL server. pgx's own
// bound is the server's (about 1 GiB), and it allocates a message's
// announced length before reading it, so a hostile or broken server could
// make the daemon allocate a gigabyte per connection. What the daemon reads
// is far smaller: a source's row of at most four numbers, a fleet store's
// row or plan (a few KiB), a notification (8000 bytes at most by default),
// an error or notice (a few KiB). 1 MiB leaves room for the longest error
// text with detail and context, and costs at most that per connection.
const PostgresMaxMessage = 1 << 20

// PostgresConfig is the configuration of a single connection to u: TLS
// verified by default for a server reached over a network
// (config.PostgresDefaultTLS), and one message bounded by
// PostgresMaxMessage. Its error is pgx's, which quotes the URL: callers must
// not show it (PostgresParseError).
func PostgresConfig(u *url.URL) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(config.PostgresDefaultTLS(u).String())
	if err != nil {
		return nil, err
	}
	cfg.MaxProtocolMessageBodyLen = PostgresMaxMessage
	return cfg, nil
}

// PostgresPoolConfig is PostgresConfig for a pool.
func PostgresPoolConfig(u *url.URL) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(config.PostgresDefaultTLS(u).String())
	if err != nil {
		return nil, err
	}
	cfg.ConnConfig.MaxProtocolMessageBodyLen = PostgresMaxMessage
	return cfg, nil
}

// PostgresParseError is what pgx found wrong with a connection URL, without
// the URL: pgx quotes it (between backquotes, and url.Parse's error inside
// between double quotes) hiding only the password, while the one place
// that decides what of a URL is shown is config.RedactURL.
func PostgresParseError(err error) string {
	return pgQuotedRE.ReplaceAllString(err.Error(), "(the URL)")
}

var pgQuotedRE = regexp.MustCompile("`[^`]*`|\"[^\"]*\"")
