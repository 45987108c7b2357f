-- scrapy-simhash band index: the server side. Python prepends the layout (TABLES, the table count;
-- W, the bytes of a bucket field; FLIP_TABLE and FLIP_BIT, byte strings: multi-probe probe j flips key
-- bit FLIP_BIT[j] of table FLIP_TABLE[j]; ``layout()``, returning each table's 0-based key bit
-- positions, built only when needed). Key schema: README "The band index".
--
-- Table t's buckets are the fields of one hash, P:b:<t - 1>: the field is the bucket key (W bytes,
-- big-endian), the value the fingerprints in the bucket, 8 bytes each (big-endian), concatenated.
-- A lookup reads a table's probed buckets with one HMGET, whatever the number of probes. Each table
-- hash also holds HASHTABLE under the empty field (a bucket field has W >= 2 bytes): a value over
-- 64 bytes keeps Redis from storing the hash as a listpack, whose linear field search made a
-- 17-field HMGET cost ~40 us at 400 buckets, against ~5 us in a hash table at any size.
--
-- A script call runs one call of an entry point (``ENTRY_POINTS`` at the end), with the calls that
-- ride along ahead of it, if any (``run``): each entry point reads its arguments from ARGV ``a`` on.
--
-- Numbers: Lua numbers are doubles, so a 64-bit fingerprint only ever travels as 8 big-endian bytes,
-- read as two 32-bit halves for the bit library (exact as doubles; bit.* works modulo 2^32).

-- Locals, not globals: the member loop runs these for every bucket member (about 35% faster).
local band, bxor, rshift, floor, tonumber, unpack32 = bit.band, bit.bxor, bit.rshift, math.floor, tonumber, struct.unpack
local P = ARGV[1]
local FPS, COUNT, EXPIRY, EXACT = P .. ':f', P .. ':n', P .. ':e', P .. ':x'

local function record_key(id)
    return P .. ':r:' .. id
end

local function table_key(t)
    return P .. ':b:' .. (t - 1)
end

local HASHTABLE = 'a value longer than 64 bytes: keeps this hash a hash table, not a listpack'

-- The layout's key bit positions, built once per script call when first needed.
local KEYPOS
local function key_positions(t)
    KEYPOS = KEYPOS or layout()
    return KEYPOS[t]
end

-- The bucket field of fingerprint bytes ``fpb`` in table ``t`` (1-based): the key Python's
-- Layout.split gives, needed here to unindex a stored fingerprint.
local function bucket_field(fpb, t)
    local b = {string.byte(fpb, 1, 8)}
    local key = {}
    for i = 1, W do key[i] = 0 end
    for i, pos in ipairs(key_positions(t)) do
        if band(rshift(b[8 - floor(pos / 8)], pos % 8), 1) == 1 then
            local byte = W - floor((i - 1) / 8)
            key[byte] = key[byte] + 2 ^ ((i - 1) % 8)
        end
    end
    return string.char(unpack(key))
end

-- JSON arrays: cjson encodes an empty table as {}, which Python reads back as "no URLs".
local function append_new(list, values)
    for _, v in ipairs(values) do
        local seen = false
        for _, have in ipairs(list) do
            if have == v then seen = true break end
        end
        if not seen and v ~= '' then list[#list + 1] = v end
    end
    return list
end

local function unband(id, fpb)
    local raw = redis.call('HGET', FPS, fpb)
    if not raw then return end
    local kept = {}
    for _, other in ipairs(cjson.decode(raw)) do
        if other ~= id then kept[#kept + 1] = other end
    end
    if #kept > 0 then
        redis.call('HSET', FPS, fpb, cjson.encode(kept))
        return
    end
    redis.call('HDEL', FPS, fpb)
    for t = 1, TABLES do
        local hash, field = table_key(t), bucket_field(fpb, t)
        local members = redis.call('HGET', hash, field) or ''
        for at = 1, #members, 8 do
            if string.sub(members, at, at + 7) == fpb then
                members = string.sub(members, 1, at - 1) .. string.sub(members, at + 8)
                break
            end
        end
        if #members > 0 then
            redis.call('HSET', hash, field, members)
        elseif redis.call('HDEL', hash, field) == 1 and redis.call('HLEN', hash) == 1 then
            redis.call('DEL', hash)  -- only HASHTABLE is left
        end
    end
end

-- The insert buckets are field ``fields[t]`` of table hash KEYS[t]; ``id_json`` is the JSON list
-- of the id alone, the fingerprint map's value in the common (unshared) case; ``unseen``: a lookup
-- just found nothing at distance 0, so the map has no entry.
local function enband(id, id_json, fpb, fields, unseen)
    local raw = not unseen and redis.call('HGET', FPS, fpb)
    if not raw then
        redis.call('HSET', FPS, fpb, id_json)
        for t = 1, TABLES do
            local old = redis.call('HGET', KEYS[t], fields[t])
            if not old and redis.call('EXISTS', KEYS[t]) == 0 then
                redis.call('HSET', KEYS[t], '', HASHTABLE)
            end
            redis.call('HSET', KEYS[t], fields[t], (old or '') .. fpb)
        end
        return
    end
    local ids = cjson.decode(raw)
    for _, other in ipairs(ids) do
        if other == id then return end
    end
    ids[#ids + 1] = id
    redis.call('HSET', FPS, fpb, cjson.encode(ids))
end

-- Insert or replace record ``r`` (fields id, id_json, fpb, first_seen, retention, blob, urls,
-- expires, write_id); a replaced record leaves its old buckets or digest, keeps its URLs and
-- earliest first-seen.
local function store(r, digest, fields, unseen)
    local key = record_key(r.id)
    local old = redis.call('HMGET', key, 'f', 't', 'u', 'd')
    local first_seen, urls = r.first_seen, r.urls
    if old[1] then
        if old[4] then redis.call('HDEL', EXACT, old[4]) else unband(r.id, old[1]) end
        if tonumber(old[2]) < tonumber(first_seen) then first_seen = old[2] end
        urls = cjson.encode(append_new(cjson.decode(old[3]), cjson.decode(urls)))
        redis.call('DEL', key)
        redis.call('ZREM', EXPIRY, r.id)
    else
        redis.call('INCR', COUNT)
    end
    if digest then
        redis.call('HSET', key, 'f', r.fpb, 't', first_seen, 'c', r.retention, 's', r.blob, 'u', urls, 'w', r.write_id,
                   'd', digest)
        redis.call('HSET', EXACT, digest, r.id)
    else
        redis.call('HSET', key, 'f', r.fpb, 't', first_seen, 'c', r.retention, 's', r.blob, 'u', urls,
                   'w', r.write_id)
        enband(r.id, r.id_json, r.fpb, fields, unseen)
    end
    if r.expires ~= '' then redis.call('ZADD', EXPIRY, r.expires, r.id) end
end

-- The record whose fields (id, id_json, fpb, first_seen, retention, blob, urls, expires, write_id)
-- start at ARGV ``at``.
local function read_record(at)
    return {id = ARGV[at], id_json = ARGV[at + 1], fpb = ARGV[at + 2], first_seen = ARGV[at + 3],
            retention = ARGV[at + 4], blob = ARGV[at + 5], urls = ARGV[at + 6], expires = ARGV[at + 7],
            write_id = ARGV[at + 8]}
end

-- Whether the record at ARGV ``at`` is stored with its own write id: an earlier attempt of this
-- very call (its reply lost, the call retried) stored it, so this call's answer is "added".
local function stored_by_this_call(at)
    return redis.call('HGET', record_key(ARGV[at]), 'w') == ARGV[at + 8]
end

local function erase(id)
    local key = record_key(id)
    local old = redis.call('HMGET', key, 'f', 'd')
    if not old[1] then return 0 end
    if old[2] then redis.call('HDEL', EXACT, old[2]) else unband(id, old[1]) end
    redis.call('DEL', key)
    redis.call('ZREM', EXPIRY, id)
    if redis.call('DECR', COUNT) <= 0 then redis.call('DEL', COUNT) end
    return 1
end

-- Arguments: mode ('c' lookup, 'ca' check-and-add, 'a' add), max distance, fingerprint bytes, its
-- bucket field in every table (TABLES x W bytes), then the record (not for 'c'). Keys: the TABLES
-- table hashes. Returns flat (id, fingerprint, distance, blob)*.
local function check_add(a)
    local mode, maxd, fpb, keys = ARGV[a], tonumber(ARGV[a + 1]), ARGV[a + 2], ARGV[a + 3]
    if mode == 'ca' and stored_by_this_call(a + 4) then return {} end
    local fields = {}
    for t = 1, TABLES do fields[t] = string.sub(keys, W * t - W + 1, W * t) end
    local qhi, qlo = unpack32('>I4I4', fpb)
    local found, out, j = {}, {}, 1
    for t = 1, mode == 'a' and 0 or TABLES do
        -- This table's probes: its insert bucket, then its buckets one key bit away.
        local probes, bytes = {fields[t]}, {string.byte(fields[t], 1, W)}
        while string.byte(FLIP_TABLE, j) == t do
            local bitno = string.byte(FLIP_BIT, j)
            local at = W - floor(bitno / 8)
            local kept = bytes[at]
            bytes[at] = bxor(kept, 2 ^ (bitno % 8))
            probes[#probes + 1] = string.char(unpack(bytes))
            bytes[at] = kept
            j = j + 1
        end
        local buckets = redis.call('HMGET', KEYS[t], unpack(probes))
        for p = 1, #probes do
            local members = buckets[p]
            for at = 1, members and #members or 0, 8 do
                local hi, lo = unpack32('>I4I4', members, at)
                local x, y = bxor(lo, qlo), bxor(hi, qhi)
                -- The popcount of both halves at once, inline (a Lua function call per member cost
                -- about 20% of this loop): after two steps each 4-bit field holds <= 4 per half, so
                -- the halves add without overflow, then the fields are summed into bytes.
                x = x - band(rshift(x, 1), 0x55555555)
                y = y - band(rshift(y, 1), 0x55555555)
                x = band(x, 0x33333333) + band(rshift(x, 2), 0x33333333)
                    + band(y, 0x33333333) + band(rshift(y, 2), 0x33333333)
                x = band(x, 0x0F0F0F0F) + band(rshift(x, 4), 0x0F0F0F0F)
                x = x + rshift(x, 8)
                local d = band(x + rshift(x, 16), 0xFF)
                if d <= maxd then found[string.sub(members, at, at + 7)] = d end
            end
        end
    end
    for cand, d in pairs(found) do
        for _, id in ipairs(cjson.decode(redis.call('HGET', FPS, cand))) do
            out[#out + 1] = id
            out[#out + 1] = cand
            out[#out + 1] = d
            out[#out + 1] = redis.call('HGET', record_key(id), 's')
        end
    end
    if mode == 'a' or (mode == 'ca' and #out == 0) then
        store(read_record(a + 4), false, fields, mode == 'ca')
    end
    return out
end

-- Arguments: digest, record. The id already holding the digest, or false after storing the record
-- (or after finding it stored by an earlier attempt of this call).
local function check_add_exact(a)
    local digest = ARGV[a]
    local holder = redis.call('HGET', EXACT, digest)
    if holder == ARGV[a + 1] and stored_by_this_call(a + 1) then return false end
    if holder then return holder end
    store(read_record(a + 1), digest, nil, false)
    return false
end

-- Arguments: id, url, first_seen, now, {class: ttl or false} JSON. 1 if the record exists.
local function merge(a)
    local id, url, first_seen, now, ttls = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
    local key = record_key(id)
    local old = redis.call('HMGET', key, 't', 'u', 'c')
    if not old[1] then return 0 end
    if tonumber(first_seen) < tonumber(old[1]) then redis.call('HSET', key, 't', first_seen) end
    redis.call('HSET', key, 'u', cjson.encode(append_new(cjson.decode(old[2]), {url})))
    local ttl = cjson.decode(ttls)[old[3]]  -- nil: a class no longer configured keeps its expiry
    if ttl then
        redis.call('ZADD', EXPIRY, string.format('%.17g', tonumber(now) + ttl), id)
    elseif ttl == false then
        redis.call('ZREM', EXPIRY, id)
    end
    return 1
end

-- Arguments: id.
local function remove(a)
    return erase(ARGV[a])
end

-- Arguments: now, limit. Erases up to ``limit`` expired records; returns how many.
local function expire(a)
    local due = redis.call('ZRANGEBYSCORE', EXPIRY, '-inf', ARGV[a], 'LIMIT', 0, tonumber(ARGV[a + 1]))
    for _, id in ipairs(due) do erase(id) end
    return #due
end

local ENTRY_POINTS = {check_add = check_add, check_add_exact = check_add_exact, merge = merge, remove = remove,
                      expire = expire}

-- ARGV[1] is the key prefix, ARGV[2] the number of calls; then each call: its entry point's name, its
-- argument count, its arguments. Calls that ride along (merges, held for the next call out: see
-- redis.py) come first and the reply is then one reply per call, a failed call an error reply of its
-- own, so that one bad call does not fail the calls it rode with.
local function run()
    if ARGV[2] == '1' then return ENTRY_POINTS[ARGV[3]](5) end
    local replies, a = {}, 3
    for i = 1, tonumber(ARGV[2]) do
        local ok, reply = pcall(ENTRY_POINTS[ARGV[a]], a + 2)
        if not ok then
            reply = type(reply) == 'table' and reply or {err = 'ERR ' .. tostring(reply)}
        end
        replies[i] = reply
        a = a + 2 + tonumber(ARGV[a + 1])
    end
    return replies
end

return run()
