package redisstore

// The Lua scripts, one per Store method, each run by one EVAL: Redis runs a
// script atomically, so a check and the write it guards cannot be split by
// another host's command, and every time comes from the server's TIME
// (scripts replicate their effects, so TIME is allowed before a write,
// Redis 5 and later). EVAL rather than EVALSHA: EVALSHA's NOSCRIPT
// fallback is a second round trip after every server restart, and the
// scripts are about a kilobyte, which Redis hashes and caches by itself.
//
// Every script begins with nowMS, the server's clock in milliseconds.
const nowMS = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`

// acquireScript takes or renews the lease.
//
//	KEYS: lease, epoch, plan
//	ARGV: holder, the caller's known epoch (decimal), ttl in ms
//	reply: {held 0|1, holder, epoch (string), expires ms (0: no expiry), now ms}
//
// Renewal needs the lease's value to be exactly HOLDER:EPOCH, holder and
// epoch both (River #197 renewed on a clause that was always true, Oban
// #1488 matched by name only). A free lease (absent: Redis expired it on
// its own clock, or it was released) is taken with a new epoch that is
// greater than the epoch counter, the caller's known epoch, and the
// stored plan's: if Redis lost its data (no AOF, a crash), the counter
// starts again from what the fleet still knows, never below it.
const acquireScript = nowMS + `
local holder, known, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
local cur = redis.call('GET', KEYS[1])
if cur then
  local h, e = string.match(cur, '^(.*):(%d+)$')
  if h == holder and e == known then
    redis.call('PEXPIRE', KEYS[1], ttl)
    return {1, h, e, now + ttl, now}
  end
  local left = redis.call('PTTL', KEYS[1])
  local exp = 0
  if left >= 0 then exp = now + left end
  return {0, h or cur, e or '0', exp, now}
end
local floor = tonumber(known) or 0
local pe = tonumber(redis.call('HGET', KEYS[3], 'epoch'))
if pe and pe > floor then floor = pe end
local n = redis.call('INCR', KEYS[2])
if n <= floor then
  n = floor + 1
  redis.call('SET', KEYS[2], string.format('%d', n))
end
local e = string.format('%d', n)
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
local old = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. string.format('%d', now - tonumber(ARGV[3])), 'LIMIT', 0, 100)
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

// writePlanScript stores the plan if the lease is HOLDER:EPOCH and no plan
// of a later epoch is stored, with the server's time.
//
//	KEYS: lease, plan
//	ARGV: holder, epoch, plan JSON
//	reply: now ms, or 0 when fenced
const writePlanScript = nowMS + `
if redis.call('GET', KEYS[1]) ~= ARGV[1] .. ':' .. ARGV[2] then
  return 0
end
local pe = tonumber(redis.call('HGET', KEYS[2], 'epoch'))
if pe and pe > tonumber(ARGV[2]) then
  return 0
end
redis.call('HSET', KEYS[2], 'epoch', ARGV[2], 'at', string.format('%d', now), 'plan', ARGV[3])
return now
`

// readPlanScript returns the plan and the server's clock.
//
//	KEYS: plan
//	reply: {now ms, epoch|false, at|false, plan JSON|false}
const readPlanScript = nowMS + `
local p = redis.call('HMGET', KEYS[1], 'epoch', 'at', 'plan')
return {now, p[1], p[2], p[3]}
`
