package redisstore

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/fleet"
)

// encodingVersion is the version of the plan's and the members' JSON. A
// reader refuses a later version rather than misread it: during a rolling
// upgrade the hosts of the old version hold their last target (the plan
// is stale to them) until they are upgraded too.
const encodingVersion = 1

// validPool is the configuration's pool names ([a-z0-9_]{1,32}): such a
// name cannot break out of the key prefix or its hash tag.
func validPool(pool string) bool {
	if len(pool) < 1 || len(pool) > 32 {
		return false
	}
	for _, c := range pool {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// keys are one pool's keys; see the package doc.
type keys struct {
	lease, epoch, plan, members, seen, released string
}

func poolKeys(pool string) (keys, error) {
	if !validPool(pool) {
		return keys{}, fmt.Errorf("fleet pool %q: not a pool name ([a-z0-9_]{1,32})", pool)
	}
	p := Prefix + "{" + pool + "}:"
	return keys{lease: p + "lease", epoch: p + "epoch", plan: p + "plan", members: p + "members", seen: p + "seen", released: p + "released"}, nil
}

// planJSON is the plan's body in the plan hash's "plan" field; its epoch
// and time are the hash's own fields, written by the script that checked
// the lease.
type planJSON struct {
	V      int            `json:"v"`
	Target int            `json:"target"`
	Shares map[string]int `json:"shares"`
	State  []byte         `json:"state,omitempty"` // base64
}

func encodePlan(p fleet.Plan) (string, error) {
	b, err := json.Marshal(planJSON{V: encodingVersion, Target: p.Target, Shares: p.Shares, State: p.State})
	return string(b), err
}

// decodePlan builds the plan from the hash's fields.
func decodePlan(epoch, atMS, body string) (fleet.Plan, error) {
	e, err := strconv.ParseUint(epoch, 10, 64)
	if err != nil || !fleet.ValidEpoch(e) {
		return fleet.Plan{}, fmt.Errorf("plan: epoch %.32q is not an epoch (1 to 2^53)", epoch)
	}
	at, err := strconv.ParseInt(atMS, 10, 64)
	if err != nil {
		return fleet.Plan{}, fmt.Errorf("plan: time %.32q is not a number", atMS)
	}
	var j planJSON
	if err := json.Unmarshal([]byte(body), &j); err != nil {
		return fleet.Plan{}, fmt.Errorf("plan of epoch %d: %w", e, err)
	}
	if j.V != encodingVersion {
		return fleet.Plan{}, fmt.Errorf("plan of epoch %d: encoding version %d, this flexiq-scaled reads %d (written by another version?)", e, j.V, encodingVersion)
	}
	return fleet.Plan{Epoch: e, Target: j.Target, Shares: j.Shares, At: msTime(at), State: j.State}, nil
}

// memberJSON is a member's heartbeat in the members hash, under its id;
// when it was seen is its score in the seen sorted set.
type memberJSON struct {
	V        int    `json:"v"`
	Capacity int    `json:"capacity"`
	Live     int    `json:"live"`
	Starting int    `json:"starting"`
	Draining int    `json:"draining"`
	Version  string `json:"version,omitempty"`
}

func encodeMember(m fleet.Member) (string, error) {
	if m.ID == "" {
		return "", fmt.Errorf("member without an id")
	}
	b, err := json.Marshal(memberJSON{V: encodingVersion, Capacity: m.Capacity, Live: m.Live, Starting: m.Starting, Draining: m.Draining, Version: m.Version})
	return string(b), err
}

func decodeMember(id, body string, seenMS int64) (fleet.Member, error) {
	var j memberJSON
	if err := json.Unmarshal([]byte(body), &j); err != nil {
		return fleet.Member{}, fmt.Errorf("member %.64q: %w", id, err)
	}
	if j.V != encodingVersion {
		return fleet.Member{}, fmt.Errorf("member %.64q: encoding version %d, this flexiq-scaled reads %d", id, j.V, encodingVersion)
	}
	return fleet.Member{ID: id, Capacity: j.Capacity, Live: j.Live, Starting: j.Starting, Draining: j.Draining, Version: j.Version, SeenAt: msTime(seenMS)}, nil
}

// msTime is a server time in milliseconds since the epoch; 0 is the zero
// time (no expiry).
func msTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// ttlMS is a lease's ttl in whole milliseconds, at least 1 (PX refuses 0).
func ttlMS(ttl time.Duration) (int64, error) {
	ms := ttl.Milliseconds()
	if ms < 1 {
		return 0, fmt.Errorf("lease ttl %s: want at least 1ms", ttl)
	}
	return ms, nil
}

// Script replies: Redis turns Lua numbers into integers, strings into
// bulk strings, and false into nil.

func replyInt(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case string:
		return strconv.ParseInt(x, 10, 64)
	}
	return 0, fmt.Errorf("reply %T: want an integer", v)
}

func replyString(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case int64:
		return strconv.FormatInt(x, 10), true
	}
	return "", false
}

func replySlice(v any, n int) ([]any, error) {
	s, ok := v.([]any)
	if !ok || (n >= 0 && len(s) != n) {
		return nil, fmt.Errorf("reply %T of %d elements: want an array of %d", v, len(s), n)
	}
	return s, nil
}

// decodeLease reads acquireScript's reply.
func decodeLease(v any) (l fleet.Lease, held bool, now time.Time, err error) {
	r, err := replySlice(v, 5)
	if err != nil {
		return l, false, now, err
	}
	var n [3]int64 // held, expires, now
	for i, j := range []int{0, 3, 4} {
		if n[i], err = replyInt(r[j]); err != nil {
			return l, false, now, fmt.Errorf("lease reply: %w", err)
		}
	}
	holder, _ := replyString(r[1])
	e, _ := replyString(r[2])
	epoch, err := strconv.ParseUint(e, 10, 64)
	if err != nil {
		return l, false, now, fmt.Errorf("lease reply: epoch %.32q", e)
	}
	return fleet.Lease{Holder: holder, Epoch: epoch, Expires: msTime(n[1])}, n[0] == 1, msTime(n[2]), nil
}

// decodeMembers reads membersScript's reply.
func decodeMembers(v any) ([]fleet.Member, time.Time, error) {
	r, err := replySlice(v, 3)
	if err != nil {
		return nil, time.Time{}, err
	}
	now, err := replyInt(r[0])
	if err != nil {
		return nil, time.Time{}, err
	}
	hash, err := replySlice(r[1], -1)
	if err != nil {
		return nil, time.Time{}, err
	}
	seen, err := replySlice(r[2], -1)
	if err != nil {
		return nil, time.Time{}, err
	}
	at := map[string]int64{}
	for i := 0; i+1 < len(seen); i += 2 {
		id, _ := replyString(seen[i])
		score, _ := replyString(seen[i+1])
		ms, err := strconv.ParseFloat(score, 64)
		if err != nil || ms < 0 || ms > math.MaxInt64/2 {
			ms = 0 // unreadable: seen never, so not live
		}
		at[id] = int64(ms)
	}
	members := make([]fleet.Member, 0, len(hash)/2)
	for i := 0; i+1 < len(hash); i += 2 {
		id, _ := replyString(hash[i])
		body, _ := replyString(hash[i+1])
		m, err := decodeMember(id, body, at[id])
		if err != nil {
			// One entry this daemon cannot read (a newer version's, a
			// corrupt or hostile write) must not hide the others: it
			// is reported, and skipped by the planner.
			m = fleet.Member{ID: id, Invalid: err.Error()}
		}
		members = append(members, m)
	}
	return members, msTime(now), nil
}

// decodeReadPlan reads readPlanScript's reply: Epoch 0 when there is no
// plan; fleet.ErrBadPlan (with the server's clock) when the stored plan
// does not decode or is above the lease's epoch.
func decodeReadPlan(v any) (fleet.Plan, time.Time, error) {
	r, err := replySlice(v, 5)
	if err != nil {
		return fleet.Plan{}, time.Time{}, err
	}
	n, err := replyInt(r[0])
	if err != nil {
		return fleet.Plan{}, time.Time{}, err
	}
	now := msTime(n)
	epoch, ok1 := replyString(r[1])
	at, ok2 := replyString(r[2])
	body, ok3 := replyString(r[3])
	if !ok1 && !ok2 && !ok3 {
		return fleet.Plan{}, now, nil
	}
	p, err := decodePlan(epoch, at, body)
	if err != nil {
		return fleet.Plan{}, now, fmt.Errorf("%w: %w", fleet.ErrBadPlan, err)
	}
	if b, ok := replyString(r[4]); ok {
		if bound, err := strconv.ParseUint(b, 10, 64); err == nil && p.Epoch > bound {
			return fleet.Plan{}, now, fmt.Errorf("%w: its epoch %d is above the lease's %d: no leader wrote it", fleet.ErrBadPlan, p.Epoch, bound)
		}
	}
	return p, now, nil
}
