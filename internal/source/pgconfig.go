package source

import (
	"net/url"
	"regexp"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

// pgMaxMessage bounds one message from a PostgreSQL server. pgx's own bound
// is the server's (about 1 GiB), and it allocates a message's announced
// length before reading it, so a hostile or broken server could make the
// daemon allocate a gigabyte per connection. What the sources read is far
// smaller: one row of at most four numbers, a notification (8000 bytes at
// most by default), an error or notice (a few KiB). 1 MiB leaves room for
// the longest error text with detail and context, and costs at most that
// per connection.
const pgMaxMessage = 1 << 20

// pgConnConfig is the connection configuration of every PostgreSQL source's
// connections: the URL with TLS verified by default for a server reached
// over a network (config.PostgresDefaultTLS), and one message bounded by
// pgMaxMessage. Its error is pgx's, which quotes the URL: callers must not
// show it.
func pgConnConfig(u *url.URL) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(config.PostgresDefaultTLS(u).String())
	if err != nil {
		return nil, err
	}
	cfg.MaxProtocolMessageBodyLen = pgMaxMessage
	return cfg, nil
}

// pgPoolConfig is pgConnConfig for a pool.
func pgPoolConfig(u *url.URL) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(config.PostgresDefaultTLS(u).String())
	if err != nil {
		return nil, err
	}
	cfg.ConnConfig.MaxProtocolMessageBodyLen = pgMaxMessage
	return cfg, nil
}

// pgParseError is what pgx found wrong with a connection URL, without the
// URL: pgx quotes it (between backquotes, and url.Parse's error inside
// between double quotes) hiding only the password, while the one place
// that decides what of a URL is shown is config.RedactURL.
func pgParseError(err error) string {
	return pgQuotedRE.ReplaceAllString(err.Error(), "(the URL)")
}

var pgQuotedRE = regexp.MustCompile("`[^`]*`|\"[^\"]*\"")
