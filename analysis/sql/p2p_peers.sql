-- p2p_peers: the global rank of the peer of every send and receive that names no process group.
-- requires: groups
-- A CPU (gloo) trace names the peer of a send or receive by its rank *in the process group the
-- program passed* (`c10d::send` / `c10d::recv_` Concrete Inputs), and names no group per call.
-- On the default group that is the global rank; on a smaller group (a pipeline replica's own
-- group in a pp x dp mesh: ranks [2, 3], peer 1 is rank 3) it is not. Every group a rank lists
-- (process_groups, from the trace's pg_config, `ranks` in group-rank order) gives one reading:
--   candidate   (call key, group g): the caller is in g, peer < |g|, and g.ranks[peer] is not
--               the caller itself; global peer = g.ranks[peer], own = the caller's place in g;
--   answered    the global peer has calls of the opposite op (a send's receive) whose peer
--               read in the same group g is the caller: the two sides agree on the channel;
--   same count  they also agree on the number of calls.
-- A call key is (rank, op, peer as the trace names it). Its reading: the answered candidate
-- with the same count first, then the smallest group, then the first created (on the default
-- group only, or where both readings name the same rank, the result is the trace's peer). A
-- call key without an answered candidate (no pg_config, or no side agrees) keeps the trace's
-- peer. Calls that name their group (GPU traces: pg_name) are left as they are.
-- Limits: the group is chosen per (rank, op, peer), not per call: a rank sending to the same
-- group-rank of two different groups in one run is read as one channel.

-- p2p_peer_map(rid): the reading of every call key of run `rid` (header).
--   returns   rank, op ('send' | 'recv'), peer (as the trace names it), global_peer,
--             pg_name (the group of the reading, for information: the calls keep theirs),
--             n (the key's calls), same_count (BOOLEAN).
-- Algorithm: candidates from _rank_groups (groups.sql) joined to the opposite side's
-- candidates on (global peer = other rank, other peer = own, same pg_name); one row per key,
-- ranked as the header says; only answered keys are returned.
CREATE OR REPLACE TEMP MACRO p2p_peer_map(rid) AS TABLE
WITH c AS MATERIALIZED (
    SELECT rank, op, peer, count(*) AS n
    FROM collectives
    WHERE run_id = rid AND op IN ('send', 'recv') AND peer IS NOT NULL AND pg_name IS NULL
    GROUP BY rank, op, peer
),
g AS MATERIALIZED (
    SELECT rank, pg_name, pg_size, k, TRY_CAST(ranks AS INTEGER[]) AS members
    FROM _rank_groups(rid)
),
cand AS MATERIALIZED (
    SELECT c.rank, c.op, c.peer, c.n, g.pg_name, g.pg_size, g.k,
        g.members[c.peer + 1] AS global_peer,
        list_position(g.members, c.rank) - 1 AS own
    FROM c JOIN g ON g.rank = c.rank
    WHERE g.members IS NOT NULL AND c.peer < len(g.members)
        AND list_contains(g.members, c.rank) AND g.members[c.peer + 1] <> c.rank
),
answered AS (
    SELECT a.*, b.n = a.n AS same_count
    FROM cand a JOIN cand b
        ON b.rank = a.global_peer AND b.op <> a.op AND b.peer = a.own AND b.pg_name = a.pg_name
)
SELECT rank, op, peer, global_peer, pg_name, n, same_count
FROM answered
QUALIFY row_number() OVER (
    PARTITION BY rank, op, peer
    ORDER BY same_count DESC, pg_size, k, TRY_CAST(pg_name AS BIGINT) NULLS LAST, pg_name
) = 1;

-- p2p_global_calls(rid): the send and receive rows of collectives for run `rid`, each with its
-- peer as a global rank.
--   returns   every column of collectives, peer replaced by p2p_peer_map's global_peer where
--             the call's key has a reading (else as the trace names it).
-- Algorithm: collectives (op send or recv) LEFT JOIN p2p_peer_map on (rank, op, peer).
CREATE OR REPLACE TEMP MACRO p2p_global_calls(rid) AS TABLE
SELECT x.* REPLACE (coalesce(m.global_peer, x.peer) AS peer)
FROM collectives x
LEFT JOIN p2p_peer_map(rid) m ON m.rank = x.rank AND m.op = x.op AND m.peer = x.peer
    AND x.pg_name IS NULL
WHERE x.run_id = rid AND x.op IN ('send', 'recv');
