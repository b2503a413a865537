package source

// The clients of the network sources, chosen on purpose (see the README's
// dependency list): go-redis for Redis, pgx for PostgreSQL, and
// client_golang's API client for Prometheus. Each source file imports what
// it uses; these blank imports only pin them in go.mod until then.
import (
	_ "github.com/prometheus/client_golang/api"
	_ "github.com/redis/go-redis/v9"
)
