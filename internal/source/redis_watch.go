package source

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Wake-up for the Redis sources: keyspace notifications. Redis publishes an
// event on __keyspace@DB__:KEY for every write to KEY, but only for the
// event classes its notify-keyspace-events setting names (Debian's default
// is "": none). The daemon never changes a server's configuration: it reads
// the setting, subscribes to exactly the keys its source reads when the
// setting covers them, and otherwise says what the server would need, and
// polls.

// watchKey is one key whose writes may mean work arrived, with the
// notify-keyspace-events classes that report them: any one of them covers
// the key ("lzsh" for a key of a generic source that does not exist yet,
// whose type is not known).
type watchKey struct {
	key     string
	classes string
}

// redisWatch is what a Redis source watches, and how it reaches its server.
type redisWatch struct {
	typ string
	// client returns the source's client, for its options: the pub/sub
	// connection is one of its own, made with the same URL, password and
	// database; CONFIG GET and TYPE run on the pool.
	client func() (*redis.Client, error)
	server func() string
	// keys lists the keys to watch; the generic source asks the server for
	// their types.
	keys func(ctx context.Context, c *redis.Client) ([]watchKey, error)
	// rearm is signalled by the source's reads: the server is back.
	rearm *rearm
}

// Bounds of the watcher's round trips. redisProbeTimeout bounds CONFIG GET
// and TYPE; redisReceiveTimeout is how long a receive waits before the
// watcher pings the server, and a ping unanswered for another such spell
// means the connection is dead (a server gone without a FIN or RST).
const (
	redisProbeTimeout   = 5 * time.Second
	redisReceiveTimeout = 15 * time.Second
)

// The keyspace event classes of notify-keyspace-events (Redis's
// keyspaceEventsStringToFlags): "A" is an alias for all of these; "K"
// (keyspace channels) and "E" (keyevent channels) choose where events are
// published, and "n" (new key) and "m" (key miss) are outside "A".
const keyspaceAllClasses = "g$lshzxetd"

// typeClasses names the classes a key type's writes are published in.
var typeClasses = map[string]string{
	"list": "l", "zset": "z", "set": "s", "hash": "h", "string": "$", "stream": "t",
}

// keyspaceFlags is a parsed notify-keyspace-events value.
type keyspaceFlags struct {
	keyspace bool          // K: __keyspace@DB__:KEY channels
	classes  map[rune]bool // the event classes, "A" expanded
	raw      string        // as the server reported it
}

func parseKeyspaceFlags(s string) keyspaceFlags {
	f := keyspaceFlags{classes: map[rune]bool{}, raw: s}
	for _, r := range s {
		switch r {
		case 'K':
			f.keyspace = true
		case 'E':
		case 'A':
			for _, c := range keyspaceAllClasses {
				f.classes[c] = true
			}
		default:
			f.classes[r] = true
		}
	}
	return f
}

// covers reports whether the flags publish the keys' events on their
// keyspace channels, and if not, the least setting that would: "K" and,
// for each key not covered, the first of its classes.
func (f keyspaceFlags) covers(keys []watchKey) (bool, string) {
	ok := f.keyspace
	need := "K"
	for _, k := range keys {
		covered := false
		for _, c := range k.classes {
			if f.classes[c] {
				covered = true
			}
		}
		if !covered {
			ok = false
		}
		if c := rune(k.classes[0]); !strings.ContainsRune(need, c) && !covered {
			need += string(c)
		}
	}
	// The least setting keeps what the server has, and adds what is missing.
	for _, c := range f.raw {
		if !strings.ContainsRune(need, c) {
			need += string(c)
		}
	}
	return ok, need
}

// leastFlags is the least notify-keyspace-events value that covers keys,
// for messages: "K" and the first class of each key.
func leastFlags(keys []watchKey) string {
	_, need := parseKeyspaceFlags("").covers(keys)
	return need
}

// redisProbe is what the watcher learns of the server before it subscribes.
type redisProbe struct {
	keys []watchKey
	db   int
	// flags is nil when CONFIG GET was refused (an ACL without
	// +config|get, or a renamed CONFIG): refused says why.
	flags   *keyspaceFlags
	refused error
}

// probe reads the keys to watch and the server's notify-keyspace-events.
func (w *redisWatch) probe(ctx context.Context, c *redis.Client) (redisProbe, error) {
	ctx, cancel := context.WithTimeout(ctx, redisProbeTimeout)
	defer cancel()
	p := redisProbe{db: c.Options().DB}
	var err error
	if p.keys, err = w.keys(ctx, c); err != nil {
		return p, err
	}
	v, err := c.ConfigGet(ctx, "notify-keyspace-events").Result()
	switch {
	case err == nil:
		f := parseKeyspaceFlags(v["notify-keyspace-events"])
		p.flags = &f
	case configRefused(err):
		p.refused = err
	default:
		return p, err
	}
	return p, nil
}

// configRefused tells a refused CONFIG GET (an error reply: an ACL's
// NOPERM, an unknown command where it is renamed or disabled) from a failure
// to reach the server or to log in.
func configRefused(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := err.Error()
	for _, p := range []string{"NOAUTH", "WRONGPASS", "LOADING", "ERR AUTH", "ERR invalid password"} {
		if strings.HasPrefix(msg, p) {
			return false
		}
	}
	return true
}

// notCovered is the error of a server whose notify-keyspace-events does
// not cover the keys.
func (w *redisWatch) notCovered(p redisProbe) error {
	_, need := p.flags.covers(p.keys)
	return fmt.Errorf("%s source %s: notify-keyspace-events is %q; wake-up needs at least %q (set it in redis.conf, or CONFIG SET; the daemon never changes it): polling only",
		w.typ, w.server(), p.flags.raw, need)
}

// watch implements Watcher for a Redis source. It probes the server once:
// if the server's notify-keyspace-events does not cover the keys, it
// returns an error saying what the server has and what it would need, and
// the pool polls only. Otherwise (or when it cannot tell: CONFIG GET
// refused, or the server not reachable yet) a goroutine subscribes to the
// keys' keyspace channels, wakes the pool on every event and after every
// (re)subscription, and reconnects after a failure (watchLoop: 1 s doubling
// to 30 s, at once when the source's reads succeed again after failing),
// reading the setting again each time, until ctx ends.
func (w *redisWatch) watch(ctx context.Context, wake func()) (string, error) {
	c, err := w.client()
	if err != nil {
		return "", err
	}
	p, err := w.probe(ctx, c)
	how := ""
	switch {
	case err != nil:
		// Not reachable now: the observations hold and say why; the
		// watcher subscribes once it is, if the setting allows.
		how = fmt.Sprintf("keyspace notifications on %s, once it answers (%s; retrying)", w.server(), redisErrText(err))
	case p.flags != nil:
		if ok, _ := p.flags.covers(p.keys); !ok {
			return "", w.notCovered(p)
		}
		how = fmt.Sprintf("keyspace notifications on %s db %d (%d keys; notify-keyspace-events is %q)", w.server(), p.db, len(p.keys), p.flags.raw)
	default:
		how = fmt.Sprintf("keyspace notifications on %s db %d (%d keys); CONFIG GET is refused (%s), so it cannot tell whether the server sends them: they need notify-keyspace-events to hold at least %q",
			w.server(), p.db, len(p.keys), redisErrText(p.refused), leastFlags(p.keys))
	}
	unreachable := err != nil
	goGuarded(ctx, w.typ, "the wake-up's goroutine", func() {
		watchLoop(ctx, w.typ, w.rearm, unreachable, func() string {
			return fmt.Sprintf("keyspace notifications on %s", w.server())
		}, func(ctx context.Context, active func()) error {
			return w.session(ctx, wake, active)
		})
	})
	return how, nil
}

// session subscribes and relays events until the connection fails or ctx
// ends, calls active once subscribed, and returns why it ended. Nothing in
// it waits without a bound: every receive has a timeout, and ctx's end
// closes the connection, in a goroutine of its own, so that a close waiting
// for go-redis's lock (which a reconnect may hold for a dial) never holds
// up the watcher, or the daemon's stop.
func (w *redisWatch) session(ctx context.Context, wake, active func()) error {
	c, err := w.client()
	if err != nil {
		return err
	}
	p, err := w.probe(ctx, c)
	if err != nil {
		return err
	}
	if p.flags != nil {
		if ok, _ := p.flags.covers(p.keys); !ok {
			return w.notCovered(p) // set off since: poll, and look again after the backoff
		}
	}
	channels := make([]string, len(p.keys))
	for i, k := range p.keys {
		channels[i] = fmt.Sprintf("__keyspace@%d__:%s", p.db, k.key)
	}
	ps := c.Subscribe(ctx) // no channels yet: no connection, no error hidden
	closePS := func() { goGuarded(ctx, w.typ, "closing the wake-up's connection", func() { ps.Close() }) }
	stop := context.AfterFunc(ctx, closePS)
	defer func() {
		if stop() { // ctx has not closed it: close it here, without waiting
			closePS()
		}
	}()
	sctx, cancel := context.WithTimeout(ctx, redisProbeTimeout)
	err = ps.Subscribe(sctx, channels...)
	cancel()
	if err != nil {
		return err
	}
	confirmed, pinged := 0, false
	for ctx.Err() == nil {
		msg, err := ps.ReceiveTimeout(ctx, redisReceiveTimeout)
		if err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() || pinged {
				return fmt.Errorf("%s source %s: keyspace notifications: %s", w.typ, w.server(), redisErrText(err))
			}
			// Quiet for a while: make sure the server is still there.
			pctx, cancel := context.WithTimeout(ctx, redisProbeTimeout)
			err = ps.Ping(pctx)
			cancel()
			if err != nil {
				return fmt.Errorf("%s source %s: keyspace notifications: no answer to a ping: %s", w.typ, w.server(), redisErrText(err))
			}
			pinged = true
			continue
		}
		pinged = false
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				if confirmed++; confirmed == len(channels) {
					// Subscribed: anything that arrived before is
					// read by the tick this causes.
					active()
					wake()
				}
			}
		case *redis.Message:
			wake()
		}
	}
	return ctx.Err()
}

// redisErrText is a Redis error for a message, on one line.
func redisErrText(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", " ")
}

func staticKeys(keys []watchKey) func(context.Context, *redis.Client) ([]watchKey, error) {
	return func(context.Context, *redis.Client) ([]watchKey, error) { return keys, nil }
}

// watcher is the redisWatch of a source on this connection.
func (r *redisConn) watcher(keys func(context.Context, *redis.Client) ([]watchKey, error)) *redisWatch {
	return &redisWatch{typ: r.typ, client: r.Client, server: r.Server, keys: keys, rearm: r.rearm}
}
