package redisstore

import "github.com/redis/go-redis/v9"

// The Lua scripts, one per Store method: Redis runs a script atomically,
// so a check and the write it guards cannot be split by another host's
// command, and every time comes from the server's TIME (scripts replicate
// their effects, so TIME is allowed before a write, Redis 5 and later).
// Each is sent as EVALSHA (go-redis's Script.Run), and as EVAL only when
// the server answers NOSCRIPT (after its restart, or a SCRIPT FLUSH): a
// call is one round trip of a few bytes, not the script's kilobyte.
//
// Anyone who can write the keys can write garbage there (issue 27): every
// script reads a stored epoch with epoch(), which takes only 1 to 2^53
// written in decimal (a Lua number is a double: above 2^53 integer
// arithmetic and string.format('%d') go wrong), and treats anything else
// as absent. So a lease whose epoch is garbage, or that would outlive ten
// of the caller's ttls and a minute (no expiry at all, or days: hosts
// whose ttls differ for a while are far inside it), is taken over
// rather than obeyed, a garbage epoch counter starts again above what the
// fleet knows, and a plan above the lease's epoch is reported as no
// leader's (fleet.ErrBadPlan).
//
// Every script begins with nowMS, the server's clock in milliseconds, and
// the helpers.
const nowMS = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local MAXE = 9007199254740992
local function epoch(s)
  if type(s) ~= 'string' or #s > 16 or not string.match(s, '^%d+$') then return nil end
  local n = tonumber(s)
  if n < 1 or n > MAXE then return nil end
  return n
end
local function dec(n) return string.format('%d', n) end
`

// acquireScript takes or renews the lease.
//
//	KEYS: lease, epoch, plan
//	ARGV: holder, the caller's known epoch (decimal), ttl in ms
//	reply: {held 0|1, holder, epoch (string), expires ms, now ms}
//
// Renewal needs the lease's value to be exactly HOLDER:EPOCH, holder and
// epoch both (River #197 renewed on a clause that was always true, Oban
// #1488 matched by name only). A free lease (absent: Redis expired it on
// its own clock, or it was released), or a garbage one, is taken with a
// new epoch that is greater than the epoch counter, the caller's known
// epoch, and the stored plan's (those of them that are epochs): if Redis
// lost its data (no AOF, a crash), the counter starts again from what the
// fleet still knows, never below it. GET and SET, not INCR: INCR fails on
// a counter that is not an integer, and would fail every acquisition.
const acquireScript = nowMS + `
local holder, known, ttl = ARGV[1], epoch(ARGV[2]) or 0, tonumber(ARGV[3])
local cur = redis.call('GET', KEYS[1])
if cur then
  local h, es = string.match(cur, '^(.*):(%d+)$')
  local e = epoch(es)
  local left = redis.call('PTTL', KEYS[1])
  if e and left >= 0 and left <= 10 * ttl + 60000 then
    if h == holder and e == known then
      redis.call('PEXPIRE', KEYS[1], ttl)
      return {1, h, es, now + ttl, now}
    end
    return {0, h, es, now + left, now}
  end
  -- garbage: taken over below
end
local floor = known
local pe = epoch(redis.call('HGET', KEYS[3], 'epoch'))
if pe and pe > floor then floor = pe end
local c = epoch(redis.call('GET', KEYS[2]))
if c and c > floor then floor = c end
local n = floor + 1
if n > MAXE then n = 1 end
local e = dec(n)
redis.call('SET', KEYS[2], e)
redis.call('SET', KEYS[1], holder .. ':' .. e, 'PX', ttl)
return {1, holder, e, now + ttl, now}
`

// releaseScript deletes the lease if holder holds it with epoch, and
// publishes the epoch released on the pool's channel, so that followers
// try at once rather than at their next tick.
//
//	KEYS: lease
//	ARGV: holder, epoch, channel
//	reply: 1 released, 0 not held
const releaseScript = `
if redis.call('GET', KEYS[1]) == ARGV[1] .. ':' .. ARGV[2] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[3], ARGV[2])
  return 1
end
return 0
`

// heartbeatScript records a member and when the server saw it, and prunes
// members silent for longer than the retention (a bounded batch, so one
// heartbeat stays cheap).
//
//	KEYS: members, seen
//	ARGV: id, member JSON, retention ms
//	reply: now ms
const heartbeatScript = nowMS + `
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], now, ARGV[1])
local old = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. dec(now - tonumber(ARGV[3])), 'LIMIT', 0, 100)
if #old > 0 then
  redis.call('HDEL', KEYS[1], unpack(old))
  redis.call('ZREM', KEYS[2], unpack(old))
end
return now
`

// membersScript lists the members and when each was seen.
//
//	KEYS: members, seen
//	reply: {now ms, HGETALL members, ZRANGE seen WITHSCORES}
const membersScript = nowMS + `
return {now, redis.call('HGETALL', KEYS[1]), redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')}
`

// writePlanScript stores the plan if the lease is HOLDER:EPOCH, with the
// server's time. Whatever plan is stored is overwritten: under the live
// lease of that epoch, a plan of a later epoch is no leader's (a later
// lease would have a later epoch), it is a hostile or corrupt write.
//
//	KEYS: lease, plan
//	ARGV: holder, epoch, plan JSON
//	reply: now ms, or 0 when fenced
const writePlanScript = nowMS + `
if not epoch(ARGV[2]) or redis.call('GET', KEYS[1]) ~= ARGV[1] .. ':' .. ARGV[2] then
  return 0
end
redis.call('HSET', KEYS[2], 'epoch', ARGV[2], 'at', dec(now), 'plan', ARGV[3])
return now
`

// readPlanScript returns the plan, the server's clock, and the epoch the
// plan may not exceed: the live lease's, or with no lease the counter's
// (false when neither is an epoch).
//
//	KEYS: plan, lease, epoch
//	reply: {now ms, epoch|false, at|false, plan JSON|false, bound|false}
const readPlanScript = nowMS + `
local p = redis.call('HMGET', KEYS[1], 'epoch', 'at', 'plan')
local bound = false
local cur = redis.call('GET', KEYS[2])
if cur then
  bound = epoch(string.match(cur, ':(%d+)$')) or false
end
if not bound then
  bound = epoch(redis.call('GET', KEYS[3])) or false
end
if bound then bound = dec(bound) end
return {now, p[1], p[2], p[3], bound}
`

// The scripts as go-redis runs them: EVALSHA, then EVAL on NOSCRIPT.
var (
	acquireLua   = redis.NewScript(acquireScript)
	releaseLua   = redis.NewScript(releaseScript)
	heartbeatLua = redis.NewScript(heartbeatScript)
	membersLua   = redis.NewScript(membersScript)
	writePlanLua = redis.NewScript(writePlanScript)
	readPlanLua  = redis.NewScript(readPlanScript)
)
