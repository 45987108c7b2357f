-- scrapy-simhash index, the server side: a Redis Functions library of one function, NAME, and every
-- step that must be atomic (lookup-then-insert, join, erase) is one call of it. A library's code runs
-- once, when it is loaded, so a call pays for its own work only (an EVALSHA of this code ran the whole
-- chunk, ~60 closures, every time). Python prepends the layout as data: NAME, BANDS, ROWS, K (sketch
-- bytes), MIN_EQUAL, MAX_BANDED, PER_GROUP, FIRST_READ, SPLIT_AT, LISTED_PER_KEY, CLUSTER, the protocol's
-- constants (index/wire.py: reply formats, sentinels, the page data's head) and same_bytes(s, at, q), a
-- byte comparison unrolled for K. Key schema: docs/how-it-works.md. Numbers are
-- doubles in Lua, so 64-bit values (fingerprints, write ids, handles) only ever travel and are stored
-- as bytes.
--
-- ARGV[1] is the key prefix P (with its cluster hash tag), ARGV[2] the entry point, its arguments
-- from ARGV[3] on. A record's page data (verification hashes, id, URL...) lives in DATA .. <write id>:
-- on one server the function writes and erases it with the rest (WRITE_DATA); on a Redis Cluster those
-- keys spread over the nodes, and the client writes them before the record is indexed.

local WRITE_DATA = not CLUSTER

-- Bound at the first call: while a library loads, Redis 7.0 gives its code no library but `redis`.
local byte, char, sub, rep, floor, pack, unpack

-- The call's arguments and the keys named by its prefix, set by each call (the function at the end).
local ARGV, P, SEQ, COUNT, EXPIRY, CLOSING, DATA, BAND_HASHES, NAMED
local SLOT = 42 + K        -- flags 1, group 5, fingerprint 8, write id 8, session 4, id handle 8, url handle 8, sketch K
local GSLOT = 18           -- used 1, canonical 5, size 5, banded 2, ttl 4, flags 1
local PER_BLOCK = 256
local LIVE, BANDED, PENDING, EXACT, SCRAPED = 1, 2, 4, 8, 16  -- SCRAPED: pending, its feed not stored yet
local CLOSED = 1           -- group flag: being expired, joins refused

-- Record ids (rids) are 5 bytes big-endian.
local function r5(n)
    return pack('>BI4', floor(n / 4294967296), n % 4294967296)
end

local function n5(s, at)
    local hi, lo = unpack('>BI4', s, at or 1)
    return hi * 4294967296 + lo
end

local function has(flags, bit)
    return floor(flags / bit) % 2 == 1
end

-- Fixed-size slots in block strings: records by rid, groups by group id. A slot's offsets go to
-- Redis as strings made once: a number argument costs the server a "%.17g" formatting.
local OFFSETS = {}
local function slot_offsets(size, n)
    local made = OFFSETS[size]
    if not made then
        made = {}
        for i = 0, PER_BLOCK - 1 do made[i] = {tostring(i * size), tostring(i * size + size - 1)} end
        OFFSETS[size] = made
    end
    return made[n % PER_BLOCK]
end

local function block_key(kind, n)
    return P .. ':' .. kind .. ':' .. string.format('%d', floor(n / PER_BLOCK))
end

local function read_slot(kind, size, n)
    local at = slot_offsets(size, n)
    local s = redis.call('GETRANGE', block_key(kind, n), at[1], at[2])
    if #s < size or byte(s, 1) == 0 then return nil end
    return s
end

-- A block of records is written whole, zeros, by its first record (rids come in order): grown slot
-- by slot, Redis would keep up to as much again as room to grow. Group ids are a sparse subset of
-- the rids, so group blocks grow as far as their last group only.
local EMPTY_BLOCK
local function write_slot(kind, size, n, value)
    local key = block_key(kind, n)
    if kind == 'm' and n % PER_BLOCK == 0 then
        EMPTY_BLOCK = EMPTY_BLOCK or rep('\0', PER_BLOCK * size)
        redis.call('SET', key, EMPTY_BLOCK, 'NX')
    end
    redis.call('SETRANGE', key, slot_offsets(size, n)[1], value)
end

local function clear_slot(kind, size, n)
    local key = block_key(kind, n)
    redis.call('SETRANGE', key, (n % PER_BLOCK) * size, rep('\0', size))
    local all = redis.call('GET', key)
    if not string.find(all, '[^%z]') then redis.call('DEL', key) end
end

-- A record's handles and sketch are cut from its slot when first used: most records parsed are
-- candidates and group heads, which only need the rest, and every string made costs its hashing.
local LATER = {idh = {27, 34}, urlh = {35, 42}, sketch = {43, 42 + K}}
local PARSED = {__index = function(r, name)
    local at = LATER[name]
    if not at then return nil end
    local value = sub(r.slot, at[1], at[2])
    r[name] = value
    return value
end}

local function parse_record(rid, s)
    return setmetatable({rid = rid, flags = byte(s, 1), gid = n5(s, 2), fp = sub(s, 7, 14), wid = sub(s, 15, 22),
                         session = sub(s, 23, 26), slot = s}, PARSED)
end

local function record(rid)
    local s = read_slot('m', SLOT, rid)
    return s and parse_record(rid, s)
end

local function store_record(r)
    write_slot('m', SLOT, r.rid, char(r.flags) .. r5(r.gid) .. r.fp .. r.wid .. r.session .. r.idh .. r.urlh .. r.sketch)
end

local function group(gid)
    local s = read_slot('g', GSLOT, gid)
    if not s then return nil end
    local banded, ttl, flags = unpack('>I2I4B', s, 12)
    return {gid = gid, canonical = n5(s, 2), size = n5(s, 7), banded = banded, ttl = ttl, flags = flags}
end

local function store_group(g)
    write_slot('g', GSLOT, g.gid, char(1) .. r5(g.canonical) .. r5(g.size) .. pack('>I2I4B', g.banded, g.ttl, g.flags))
end

-- Hash fields (buckets, handles, digests) as this call last read or wrote them, by key .. '\0' ..
-- field ('' for none): a lookup that finds nothing inserts into the very fields it has just read.
local FIELDS

local function hget(key, field, id)
    id = id or key .. '\0' .. field
    local value = FIELDS[id]
    if value == nil then
        value = redis.call('HGET', key, field) or ''
        FIELDS[id] = value
    end
    return value
end

local function hset(key, field, value)
    if value == '' then redis.call('HDEL', key, field) else redis.call('HSET', key, field, value) end
    FIELDS[key .. '\0' .. field] = value
end

-- Lists of fixed-size entries in hash fields (buckets, handles) or strings (group members): rids,
-- or a band key's remaining bytes and a rid. ``list`` without its first entry equal to ``entry``.
local function list_remove(list, entry)
    local size = #entry
    for at = 1, #list, size do
        if sub(list, at, at + size - 1) == entry then return sub(list, 1, at - 1) .. sub(list, at + size) end
    end
    return list
end

local function list_each(list)
    local out = {}
    for at = 1, #(list or ''), 5 do out[#out + 1] = n5(list, at) end
    return out
end

-- A 2-byte shard of a hashed value (an id handle, a text digest) names the hash, the rest is the
-- field: small hashes stay listpacks (about 20 bytes an entry instead of 60 in a hash table).
local function sharded(kind, value)
    return P .. ':' .. kind .. ':' .. sub(value, 1, 2), sub(value, 3)
end

local function hlist_add(kind, value, rid)
    local key, field = sharded(kind, value)
    hset(key, field, hget(key, field) .. r5(rid))
end

local function hlist_remove(kind, value, rid)
    local key, field = sharded(kind, value)
    hset(key, field, list_remove(hget(key, field), r5(rid)))
end

local function hlist(kind, value)
    return list_each(hget(sharded(kind, value)))
end

-- Band buckets, gathered so that an index of any size keeps few, small hash entries: a band key's
-- first byte (with the band's number) names the hash, its second byte the field, and the field's
-- value lists entries of (the key's remaining bytes, rid). A field past SPLIT_AT entries is split 4
-- ways by the next two bits of the key into fields named by the bits so far, and keeps the marker
-- SPLIT; a split field splits again, down to LEVELS levels (the key's third byte, two bits a level).
-- A lookup copies and searches a short list, and an insert rewrites one, however large the index;
-- four ways, not more, because every field costs the hash an entry. Measured:
-- docs/decisions/bucket-fields.md.
local REST = ROWS - 2
local ENTRY = REST + 5
local SPLIT, LEVELS = '\0', 5   -- one byte: never a list of entries

-- The hash and field names are kept as made (``BAND_HASHES``, ``CHARS``): Redis' Lua hashes every
-- string it makes, and a lookup names 2 of them a band.
local CHARS = {}

local function bucket(sketch, b)
    local at = (b - 1) * ROWS + 1
    local first, second = byte(sketch, at, at + 1)
    local hashes = BAND_HASHES[b]
    local key = hashes[first]
    if not key then
        key = hashes.name .. CHARS[first]
        hashes[first] = key
    end
    return key, CHARS[second], sub(sketch, at + 2, at + ROWS - 1)
end

-- The two bits of the key's remaining bytes ``rest`` that a split at ``level`` parts a list by: its
-- first byte's, the high ones first.
local function split_bits(rest, level)
    return char(floor(byte(rest, 1) / 4 ^ (4 - level)) % 4)
end

-- Where a prefix's reads of band fields ended: the level most of its recent reads ended at (``depth``,
-- from ``ends``, halved every DEPTH_WINDOW reads), and up to DEEP_MAX fields that ended elsewhere
-- (``deep``): a field split deep under a short text's family is read there first, while the rest of
-- the index keeps being read at its usual level.
local DEPTH_WINDOW, DEEP_MAX = 1024, 16384

local function ended(id, level)
    local named, ends = NAMED, NAMED.ends
    ends[level] = ends[level] + 1
    named.reads = named.reads + 1
    if named.reads >= DEPTH_WINDOW then
        local most = 1
        for l = 2, LEVELS do
            if ends[l] > ends[most] then most = l end
        end
        for l = 1, LEVELS do ends[l] = floor(ends[l] / 2) end
        named.depth, named.reads = most, 0
    end
    local deep = named.deep
    if level == named.depth then
        if deep[id] then deep[id], named.deep_count = nil, named.deep_count - 1 end
    elseif deep[id] then
        deep[id] = level
    elseif named.deep_count < DEEP_MAX then
        deep[id], named.deep_count = level, named.deep_count + 1
    end
end

-- The field of hash ``key`` that lists the entries of band key (field, rest), its level and its
-- value. A read starts at the level where this field's or this prefix's reads ended (``ended``): in
-- an index whose fields have split, that is one read a band instead of one a level. The level is a
-- hint the library keeps, not the index: a field not split that deep is found by reading up from
-- there (a level's name is the one above it and one more byte), a marker by reading down.
local function bucket_field(key, field, rest)
    local id = key .. '\0' .. field
    local start = NAMED.deep[id] or NAMED.depth
    local name, level = field, 1
    while level < start do
        name, level = name .. split_bits(rest, level), level + 1
    end
    local value = hget(key, name, level == 1 and id or nil)
    if value == '' then
        for up = level - 1, 1, -1 do
            local above = hget(key, sub(name, 1, up))
            if above == SPLIT then break end  -- split down to here: this key's list is empty
            name, level, value = sub(name, 1, up), up, above
            if above ~= '' then break end
        end
    end
    while value == SPLIT and level < LEVELS do
        name, level = name .. split_bits(rest, level), level + 1
        value = hget(key, name)
    end
    ended(id, level)
    return name, level, value
end

-- The rids ``list`` holds under a band key's remaining bytes ``rest``, in order (``NONE``, shared,
-- for none: most lists a lookup reads hold nothing under its keys).
local NONE = {}
local function listed(list, rest)
    local at = string.find(list, rest, 1, true)
    if not at then return NONE end
    local out = {}
    while at do
        if (at - 1) % ENTRY == 0 then
            out[#out + 1] = n5(list, at + REST)
            at = string.find(list, rest, at + ENTRY, true)
        else
            at = string.find(list, rest, at + 1, true)
        end
    end
    return out
end

local function band_rids(sketch, b)
    local key, field, rest = bucket(sketch, b)
    local _, _, list = bucket_field(key, field, rest)
    return listed(list, rest)
end

-- Field ``name`` (at ``level``) becomes the marker, its entries ``list`` going to the next level.
local function split(key, name, level, list)
    local parts = {}
    for at = 1, #list, ENTRY do
        local deeper = name .. split_bits(sub(list, at, at + REST - 1), level)
        parts[deeper] = (parts[deeper] or '') .. sub(list, at, at + ENTRY - 1)
    end
    for deeper, part in pairs(parts) do hset(key, deeper, part) end
    hset(key, name, SPLIT)
end

-- Whether ``list`` holds LISTED_PER_KEY records of group ``gid`` under ``rest``, or ``rid`` itself.
-- ``groups`` holds the groups of the records read so far (false: gone): a record's keys list the
-- same few members of its group, each read once.
local function key_full(list, rest, gid, rid, groups)
    local count = 0
    for _, other in ipairs(listed(list, rest)) do
        if other == rid then return true end
        local other_gid = groups[other]
        if other_gid == nil then
            local s = read_slot('m', SLOT, other)
            other_gid = s and n5(s, 2) or false
            groups[other] = other_gid
        end
        if other_gid == gid then
            count = count + 1
            if count >= LISTED_PER_KEY then return true end
        end
    end
    return false
end

-- A record goes under those of its band keys (of ``bands``, or all) that fewer than LISTED_PER_KEY
-- records of its group are under (base.py says why), and under its last key when it would go under
-- none: a copy of its text must find it, or identical texts could be kept twice.
local function enband(r, bands)
    local under, rid, groups = false, r5(r.rid), {}
    for b = 1, BANDS do
        if not bands or bands[b] then
            local key, field, rest = bucket(r.sketch, b)
            local name, level, list = bucket_field(key, field, rest)
            local last = not bands and b == BANDS and not under
            if last or not key_full(list, rest, r.gid, r.rid, groups) then
                under = true
                list = list .. rest .. rid
                if level < LEVELS and #list > SPLIT_AT * ENTRY then
                    split(key, name, level, list)
                else
                    hset(key, name, list)
                end
            end
        end
    end
end

-- Take ``r`` out of the buckets; the bands it was listed in, which its group's other members may
-- now take over.
local function unband(r)
    local released = {}
    for b = 1, BANDS do
        local key, field, rest = bucket(r.sketch, b)
        local name, _, list = bucket_field(key, field, rest)
        local left = list_remove(list, rest .. r5(r.rid))
        if left ~= list then
            hset(key, name, left)
            released[b] = true
        end
    end
    return released
end

local function add_handles(r)
    hlist_add('i', r.idh, r.rid)
    if r.urlh ~= r.idh then hlist_add('i', r.urlh, r.rid) end
end

local function remove_handles(r)
    hlist_remove('i', r.idh, r.rid)
    if r.urlh ~= r.idh then hlist_remove('i', r.urlh, r.rid) end
end

local function set_expiry(g, now)
    if g.ttl > 0 then redis.call('ZADD', EXPIRY, now + g.ttl, g.gid) end
end

-- A session holds a lease (a key with a TTL the client renews) while its crawl runs.
local function live(session)
    return redis.call('EXISTS', P .. ':live:' .. session) == 1
end

-- A pending record of another session whose lease lapsed: a crashed crawl's item, never scraped.
local function crashed(r, session)
    return has(r.flags, PENDING) and r.session ~= session and not live(r.session)
end

-- One pass over the records under this id: the one this very call stored on an earlier attempt
-- (its reply was lost), if any; else whether one is pending in another live session (the same page
-- is in flight there), and how many live ones there are of this session and of earlier ones (a
-- recrawl: the caller looks at them, as insert counts them).
local function own_write(idh, wid, session)
    local held, this, earlier = false, 0, 0
    for _, rid in ipairs(hlist('i', idh)) do
        local r = record(rid)
        if r then
            if r.wid == wid then return r, false, 0, 0 end
            if r.idh == idh then
                held = held or (has(r.flags, PENDING) and not has(r.flags, SCRAPED) and r.session ~= session
                                and live(r.session))
                if r.session == session then
                    this = this + 1
                elseif not crashed(r, session) then
                    earlier = earlier + 1
                end
            end
        end
    end
    return nil, held, this, earlier
end

-- The page data of a record, one string (wire.py ``page_fields``): from ARGV[a], its verification
-- blob, kept when ``keep_blob``, and its head and fields, which go first.
local function write_data(wid, a, keep_blob)
    if not WRITE_DATA then return end
    redis.call('SET', DATA .. wid, keep_blob and ARGV[a + 1] .. ARGV[a] or ARGV[a + 1])
end

-- A candidate in wire.CANDIDATE (42) bytes: rid, group, canonical (5 bytes each), fingerprint (8), sketch
-- bytes shared (2), write id (8), whether the group has a canonical record (1) and its write id (8).
local function candidate_reply(r, g, same, head)
    return r5(r.rid) .. r5(r.gid) .. r5(g.canonical) .. r.fp .. pack(EQUAL_FORMAT, same) .. r.wid
        .. (head and '\1' .. head.wid or NO_CANONICAL)
end

-- A lookup's reply in few elements, since the client parses a reply element by element: one string
-- of sequence number, added rid (0: none, BUSY), records of the same id in this session and
-- earlier ones (doubles), the counts of stale write ids and of candidates (4 bytes each), the stale
-- write ids (8 bytes each) and the candidates; then ``rows``, the page rows, in place.
local function lookup_reply(seq, added, this, earlier, stale, candidates, rows)
    table.insert(rows, 1, pack(LOOKUP_HEAD, seq, added, this, earlier, #stale, #candidates)
        .. table.concat(stale) .. table.concat(candidates))
    return rows
end

-- A record's page data as stored (wire.py ``read_page`` parses it); '' when gone. Without
-- ``with_blob`` (the caller holds the hashes, or reads the page as a canonical) the row ends where
-- its fields do, or a little past: the blob comes last. A value too short for its head is returned
-- as it is, for the client to refuse.
local function page_row(wid, with_blob)
    local key = DATA .. wid
    if with_blob then return redis.call('GET', key) or '' end
    local row = redis.call('GETRANGE', key, 0, PAGE_READ - 1)
    if #row < PAGE_HEAD_SIZE then return row end
    local id, url, host, retention = unpack(PAGE_HEAD, row)
    local size = PAGE_HEAD_SIZE + id + url + host + retention
    if size > #row then return redis.call('GETRANGE', key, 0, size - 1) end
    return row
end

-- Erase one record; its group keeps its other members and, when the canonical goes, the earliest
-- findable member becomes canonical. Returns {rid, was canonical, promoted rid or 0, its write id,
-- the erased record's write id}.
local function erase_record(r, replacement)
    local released = has(r.flags, BANDED) and unband(r)
    if has(r.flags, EXACT) then
        local key, field = sharded('x', sub(r.sketch, 1, 16))
        if hget(key, field) == r5(r.rid) then hset(key, field, '') end
    end
    remove_handles(r)
    clear_slot('m', SLOT, r.rid)
    if WRITE_DATA then redis.call('DEL', DATA .. r.wid) end
    if redis.call('DECR', COUNT) <= 0 then redis.call('DEL', COUNT) end
    local g = group(r.gid)
    local members = P .. ':gm:' .. r.gid
    local list = list_remove(redis.call('GET', members) or '', r5(r.rid))
    local was_canonical = g.canonical == r.rid
    local promoted, promoted_wid = 0, ''
    if g.size <= 1 and not replacement then
        clear_slot('g', GSLOT, g.gid)
        redis.call('DEL', members)
        redis.call('ZREM', EXPIRY, g.gid)
        redis.call('SREM', CLOSING, g.gid)
        return {r.rid, was_canonical and 1 or 0, 0, '', r.wid}
    end
    if has(r.flags, BANDED) and not was_canonical then g.banded = g.banded - 1 end
    if was_canonical then
        g.canonical = 0
        if replacement then
            g.canonical = replacement
        else
            for _, rid in ipairs(list_each(list)) do
                local m = record(rid)
                if m and has(m.flags, BANDED) then
                    g.canonical, promoted, promoted_wid = rid, rid, m.wid
                    g.banded = g.banded - 1
                    break
                end
            end
        end
    end
    if released and next(released) and g.flags ~= CLOSED then
        for _, rid in ipairs(list_each(list)) do
            local m = record(rid)
            if m and has(m.flags, BANDED) then enband(m, released) end
        end
    end
    g.size = g.size - 1
    store_group(g)
    if #list > 0 then redis.call('SET', members, list) else redis.call('DEL', members) end
    return {r.rid, was_canonical and 1 or 0, promoted, promoted_wid, r.wid}
end

-- Add a new canonical; a stale record under its id (a crashed crawl's) hands it its group (the first
-- one's, when the crashed crawl indexed the id more than once).
-- Arguments from ARGV[a]: fingerprint, write id, session, id handle, url handle, ttl, now, then the
-- page data (write_data's).
local function insert(a, sketch, flags, digest)
    local fp, wid, session, idh, urlh = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
    local ttl, now = tonumber(ARGV[a + 5]), tonumber(ARGV[a + 6])
    local rid = redis.call('INCR', SEQ)
    local gid, stale_wids, this, earlier = rid, {}, 0, 0
    for _, other in ipairs(hlist('i', idh)) do
        local r = record(other)
        if r and r.idh == idh then
            if crashed(r, session) then
                local g = group(r.gid)
                if gid == rid and g.canonical == r.rid and g.size > 1 then  -- one group only: the first
                    gid = r.gid
                    erase_record(r, rid)
                else
                    erase_record(r)
                end
                stale_wids[#stale_wids + 1] = r.wid
            elseif r.session == session then
                this = this + 1
            else
                earlier = earlier + 1
            end
        end
    end
    local r = {rid = rid, flags = flags, gid = gid, fp = fp, wid = wid, session = session, idh = idh, urlh = urlh,
               sketch = sketch}
    store_record(r)
    write_data(wid, a + 7, true)  -- a blob sent is kept (banded, or a short text's with furniture)
    if has(flags, BANDED) then enband(r) end
    if digest then
        local key, field = sharded('x', digest)
        hset(key, field, r5(rid))
    end
    add_handles(r)
    local g = group(gid)
    if g then
        if ttl == 0 and g.ttl > 0 then redis.call('ZREM', EXPIRY, gid) end  -- kept for good now
        g.canonical, g.size, g.ttl = rid, g.size + 1, ttl
    else
        g = {gid = gid, canonical = rid, size = 1, banded = 0, ttl = ttl, flags = 0}
    end
    store_group(g)
    redis.call('APPEND', P .. ':gm:' .. gid, r5(rid))
    set_expiry(g, now)
    redis.call('INCR', COUNT)
    return {rid, this, earlier, stale_wids}
end

-- A group's PER_GROUP best candidates (most sketch bytes shared, then oldest): a page joins a group
-- through any of its members, so the rest of a large group's members are not worth a reply. Slots
-- ``s`` are kept unparsed: in a large family most members read are near the page and left out.
local function keep_best(best, rid, s, same)
    local gid = n5(s, 2)
    local kept = best[gid] or {}
    best[gid] = kept
    local at = #kept + 1
    while at > 1 and (kept[at - 1].same < same or (kept[at - 1].same == same and kept[at - 1].rid > rid)) do
        at = at - 1
    end
    if at <= PER_GROUP then
        table.insert(kept, at, {rid = rid, s = s, same = same})
        kept[PER_GROUP + 1] = nil
    end
end

-- Arguments: since, sketch, whether the page data came along (one server) or is stored (a cluster),
-- then insert's. Candidates newer than ``since``, best first, or the record added when there are
-- none (NEEDS_DATA, nothing written, when its data did not come), as lookup_reply, with the
-- page rows of the FIRST_READ best candidates (one server only).
local function check_add(a)
    local since, sketch, ready = tonumber(ARGV[a]), ARGV[a + 1], ARGV[a + 2] == '1'
    local idh, wid, session = ARGV[a + 6], ARGV[a + 4], ARGV[a + 5]
    local seq = tonumber(redis.call('GET', SEQ) or '0')
    local mine, held, this, earlier = own_write(idh, wid, session)
    if mine then return lookup_reply(seq, mine.rid, 0, 0, {}, {}, {}) end
    if held then return lookup_reply(seq, BUSY, 0, 0, {}, {}, {}) end
    -- A record's slot is compared with the sketch's bytes in place: most records a lookup reads are
    -- only compared, never parsed. Those bytes are made at the first record, as most pages meet none.
    local seen, best, query = {}, {}, nil
    for b = 1, BANDS do
        for _, rid in ipairs(band_rids(sketch, b)) do
            if rid > since and seen[rid] == nil then
                local s = read_slot('m', SLOT, rid)
                seen[rid] = s or false
                if s then
                    query = query or {byte(sketch, 1, K)}
                    local same = same_bytes(s, SLOT - K + 1, query)
                    if same >= MIN_EQUAL then keep_best(best, rid, s, same) end
                end
            end
        end
    end
    -- A group whose canonical is a crashed crawl's page is joined by no page: its copies were
    -- dropped for a page that never reached the feed. This page starts a group of its own (or,
    -- being that page, takes its record's place: insert).
    local found = {}
    for gid, kept in pairs(best) do
        local g = group(gid)
        local slot = g and g.canonical > 0 and seen[g.canonical]  -- the canonical's slot, if the scan read it
        local head = g and g.canonical > 0 and (slot and parse_record(g.canonical, slot) or record(g.canonical))
        if g and g.flags ~= CLOSED and not (head and crashed(head, session)) then
            for _, c in ipairs(kept) do
                c.r, c.g, c.head = parse_record(c.rid, c.s), g, head
                found[#found + 1] = c
            end
        end
    end
    if #found == 0 then
        if not ready then return lookup_reply(seq, NEEDS_DATA, 0, 0, {}, {}, {}) end
        local added = insert(a + 3, sketch, LIVE + BANDED + PENDING)
        return lookup_reply(seq, added[1], added[2], added[3], added[4], {}, {})
    end
    table.sort(found, function(x, y) return x.same > y.same or (x.same == y.same and x.rid < y.rid) end)
    local candidates, read = {}, {}
    for i, c in ipairs(found) do
        candidates[i] = candidate_reply(c.r, c.g, c.same, c.head)
        if WRITE_DATA and i <= FIRST_READ then
            -- The pages its details are made of, as redis.py ``_pages_of`` lists them; the caller holds
            -- what it wrote.
            read[#read + 1] = c.r.session == session and HELD or page_row(c.r.wid, true)
            if c.head and c.head.rid ~= c.r.rid then
                read[#read + 1] = c.head.session == session and HELD or page_row(c.head.wid, false)
            end
        end
    end
    return lookup_reply(seq, 0, this, earlier, {}, candidates, read)
end

-- Arguments: digest (16 bytes), then insert's. The record holding the digest, or the one added.
local function check_add_exact(a)
    local digest, idh, wid, session = ARGV[a], ARGV[a + 4], ARGV[a + 2], ARGV[a + 3]
    local mine, held, this, earlier = own_write(idh, wid, session)
    if mine then return lookup_reply(0, mine.rid, 0, 0, {}, {}, {}) end
    if held then return lookup_reply(0, BUSY, 0, 0, {}, {}, {}) end
    local key, field = sharded('x', digest)
    local holder = hget(key, field)
    if holder ~= '' then
        local r = record(n5(holder))
        local g = r and group(r.gid)
        local head = g and g.canonical > 0 and record(g.canonical)
        if head and g.flags ~= CLOSED and not crashed(head, session) then
            return lookup_reply(0, 0, this, earlier, {}, {candidate_reply(r, g, K, head)}, {})
        end
        hset(key, field, '')
    end
    local added = insert(a + 1, digest .. rep('\0', K - 16), LIVE + PENDING + EXACT, digest)
    return lookup_reply(0, added[1], added[2], added[3], added[4], {}, {})
end

-- Arguments: matched rid, want banded, sketch, fingerprint, write id, session, id handle, url handle,
-- now, then the page data. One string (one reply element) of rid, group, canonical, size, banded
-- (doubles); rid 0 when the matched record's group is gone.
local function join(a)
    local matched, want, sketch = tonumber(ARGV[a]), ARGV[a + 1] == '1', ARGV[a + 2]
    local fp, wid, session, idh, urlh, now = ARGV[a + 3], ARGV[a + 4], ARGV[a + 5], ARGV[a + 6], ARGV[a + 7],
        tonumber(ARGV[a + 8])
    local mine = own_write(idh, wid, session)
    if mine then
        local g = group(mine.gid)
        return pack(JOINED, mine.rid, mine.gid, g.canonical, g.size, has(mine.flags, BANDED) and 1 or 0)
    end
    local m = record(matched)
    local g = m and group(m.gid)
    if not g or g.canonical == 0 or g.flags == CLOSED then return pack(JOINED, 0, 0, 0, 0, 0) end
    local banded = want and g.banded < MAX_BANDED
    local r = {rid = redis.call('INCR', SEQ), flags = LIVE + (banded and BANDED or 0), gid = g.gid, fp = fp,
               wid = wid, session = session, idh = idh, urlh = urlh, sketch = sketch}
    store_record(r)
    write_data(wid, a + 9, banded)
    if banded then
        enband(r)
        g.banded = g.banded + 1
    end
    add_handles(r)
    g.size = g.size + 1
    store_group(g)
    redis.call('APPEND', P .. ':gm:' .. g.gid, r5(r.rid))
    set_expiry(g, now)
    redis.call('INCR', COUNT)
    return pack(JOINED, r.rid, g.gid, g.canonical, g.size, banded and 1 or 0)
end

-- Arguments: session, rids. Their items were scraped: no longer pending.
local function confirm(a)
    for i = a + 1, #ARGV do
        local r = record(tonumber(ARGV[i]))
        if r and has(r.flags, PENDING) and r.session == ARGV[a] then
            r.flags = r.flags - PENDING - (has(r.flags, SCRAPED) and SCRAPED or 0)
            store_record(r)
        end
    end
    return 1
end

-- Arguments: the session, then rids whose items were scraped and wait for a feed to be stored.
local function scraped(a)
    for i = a + 1, #ARGV do
        local r = record(tonumber(ARGV[i]))
        if r and has(r.flags, PENDING) and not has(r.flags, SCRAPED) and r.session == ARGV[a] then
            r.flags = r.flags + SCRAPED
            store_record(r)
        end
    end
    return 1
end

local function describe(r, g)
    return {r.rid, r.gid, g.canonical == r.rid and 1 or 0, r.fp, r.wid, has(r.flags, PENDING) and 1 or 0,
            has(r.flags, BANDED) and 1 or 0}
end

-- Arguments: handles. Every record found under any of them: {rid, gid, canonical?, fp, wid, pending?, banded?}.
local function find(a)
    local out, seen = {}, {}
    for i = a, #ARGV do
        for _, rid in ipairs(hlist('i', ARGV[i])) do
            local r = not seen[rid] and record(rid)
            if r and (r.idh == ARGV[i] or r.urlh == ARGV[i]) then
                seen[rid] = true
                out[#out + 1] = describe(r, group(r.gid))
            end
        end
    end
    return out
end

-- Arguments: rids. Erase them: {rid, was canonical, promoted rid, promoted write id} each.
local function erase(a)
    local out = {}
    for i = a, #ARGV do
        local r = record(tonumber(ARGV[i]))
        if r then out[#out + 1] = erase_record(r) end
    end
    return out
end

-- Arguments: now, limit. Groups whose retention has passed are closed (no join, no candidate) and
-- listed with their records: {gid, {rid, write id}...}. Closed groups of an expiry that did not
-- finish are listed again.
local function close_due(a)
    local due = redis.call('ZRANGEBYSCORE', EXPIRY, '-inf', ARGV[a], 'LIMIT', 0, tonumber(ARGV[a + 1]))
    for _, gid in ipairs(redis.call('SMEMBERS', CLOSING)) do due[#due + 1] = gid end
    local out = {}
    for _, gid in ipairs(due) do
        local g = group(tonumber(gid))
        redis.call('ZREM', EXPIRY, gid)
        if g then
            g.flags = CLOSED
            store_group(g)
            redis.call('SADD', CLOSING, gid)
            local entry = {g.gid}
            for _, rid in ipairs(list_each(redis.call('GET', P .. ':gm:' .. gid))) do
                local r = record(rid)
                if r then entry[#entry + 1] = {rid, r.wid} end
            end
            out[#out + 1] = entry
        else
            redis.call('SREM', CLOSING, gid)
        end
    end
    return out
end

-- Arguments: none. The layout, key schema and fingerprint version the index was built with (set on
-- first use).
local function identity(a)
    local meta = P .. ':meta'
    if redis.call('EXISTS', meta) == 0 then
        redis.call('HSET', meta, 'schema', ARGV[a], 'fingerprint', ARGV[a + 1], 'layout', ARGV[a + 2])
        if CLUSTER then redis.call('HSET', meta, 'node', redis.call('CLUSTER', 'MYID')) end  -- slot_moving
    end
    return redis.call('HMGET', meta, 'schema', 'fingerprint', 'layout')
end

-- Arguments: pairs of (write id, '1' if the blob is wanted) up to ARGV[last] (default: all); one
-- server only (the page data is in the function's reach). Rows as page_row.
local function details(a, last)
    local out = {}
    for i = a, last or #ARGV, 2 do out[#out + 1] = page_row(ARGV[i], ARGV[i + 1] == '1') end
    return out
end

local ENTRY_POINTS = {check_add = check_add, check_add_exact = check_add_exact, join = join, confirm = confirm,
                      scraped = scraped, find = find, erase = erase, close_due = close_due, identity = identity,
                      details = details}
local BATCHED = {check_add = check_add, check_add_exact = check_add_exact, join = join, details = details}

-- Arguments: calls of the entry points in BATCHED, each as its name, its argument count, its
-- arguments. Their replies in order, each call seeing the index as the calls before it left it; a
-- call that fails has its error in place of its reply, and the calls after it still run.
ENTRY_POINTS.batch = function(a)
    local out = {}
    while a <= #ARGV do
        FIELDS = {}
        local ok, reply = pcall(BATCHED[ARGV[a]], a + 2, a + 1 + tonumber(ARGV[a + 1]))
        if not ok then reply = {err = type(reply) == 'table' and reply.err or tostring(reply)} end
        out[#out + 1] = reply
        a = a + 2 + tonumber(ARGV[a + 1])
    end
    return out
end

local NAMES = {}  -- the key names of each prefix a call has named, made once

-- Whether the index's slot is moving to or from this node (a reshard). Keys then move one MIGRATE at
-- a time: a call would find some gone from the source, or not yet on the target it was ASKed to, and
-- the writes made before that would stay. So a call is refused whole, as TRYAGAIN (transient).
-- On the source a key that never exists is not local while the slot migrates: one probe tells. Calls
-- reach the target (ASKed) once the meta key has moved there, and meta names the node that last served
-- the index: only on another node is CLUSTER NODES read (its size grows with the cluster) to tell an
-- import from a slot moved for good or a failover, after which meta names this node.
local function slot_moving()
    local probe = redis.pcall('EXISTS', P .. ':never')
    if type(probe) == 'table' and probe.err then return true end
    local meta, me = P .. ':meta', redis.call('CLUSTER', 'MYID')
    local node = redis.call('HGET', meta, 'node')
    if node == me or (not node and redis.call('EXISTS', meta) == 0) then return false end
    local mark = '[' .. redis.call('CLUSTER', 'KEYSLOT', meta) .. '-'
    for line in string.gmatch(redis.call('CLUSTER', 'NODES'), '[^\n]+') do
        if string.find(line, 'myself', 1, true) then
            if string.find(line, mark, 1, true) then return true end
            break
        end
    end
    redis.call('HSET', meta, 'node', me)
    return false
end

redis.register_function(NAME, function(_, args)
    if not byte then
        byte, char, sub, rep = string.byte, string.char, string.sub, string.rep
        floor, pack, unpack = math.floor, struct.pack, struct.unpack
        for i = 0, 255 do CHARS[i] = char(i) end
    end
    ARGV, P = args, args[1]
    local names = NAMES[P]
    if not names then
        -- page data keys carry no hash tag: on a cluster they spread
        names = {P .. ':n', P .. ':c', P .. ':e', P .. ':closing', string.gsub(P, '[{}]', '') .. ':d:', {},
                 depth = 1, ends = {}, reads = 0, deep = {}, deep_count = 0}
        for b = 1, BANDS do names[6][b] = {name = P .. ':b:' .. char(b - 1)} end
        for l = 1, LEVELS do names.ends[l] = 0 end
        NAMES[P] = names
    end
    SEQ, COUNT, EXPIRY, CLOSING, DATA, BAND_HASHES = names[1], names[2], names[3], names[4], names[5], names[6]
    NAMED = names
    FIELDS = {}
    if CLUSTER and slot_moving() then
        return redis.error_reply('TRYAGAIN the index slot is moving between cluster nodes')
    end
    return ENTRY_POINTS[args[2]](3)
end)
