-- causeway trace schema, version 24: requests served by traced processes,
-- seen at their sockets (include/causeway/model/requests.h). Each chunk's
-- time is kept as the gap from the one before, in µs, a JSON array per
-- request (workloads/serving, 60 requests of 32 chunks ~14 ms apart: 5.1 bytes
-- a chunk of text, 20 KB for the table in all).
CREATE TABLE requests (
  session_id     INTEGER NOT NULL DEFAULT 1,
  ts_ns          INTEGER NOT NULL,
  pid            INTEGER NOT NULL,
  tid            INTEGER NOT NULL,
  conn           INTEGER NOT NULL,
  protocol       TEXT NOT NULL,
  method         TEXT,
  path           TEXT,
  status         INTEGER,
  first_byte_ns  INTEGER,
  first_chunk_ns INTEGER,
  last_byte_ns   INTEGER,
  chunks         INTEGER NOT NULL,
  bytes_in       INTEGER NOT NULL,
  bytes_out      INTEGER NOT NULL,
  aborted        INTEGER NOT NULL,
  chunk_gaps_us  TEXT
);
CREATE INDEX requests_ts ON requests(ts_ns);

-- Each request's latency as its client sees it, in ms: time to first chunk
-- (TTFT), mean time per chunk after it (TPOT), and the whole response.
CREATE VIEW request_latency AS
SELECT session_id, pid, conn, ts_ns, method, path, status, chunks, aborted,
       (first_chunk_ns - ts_ns) / 1e6 AS ttft_ms,
       CASE WHEN chunks > 1 THEN (last_chunk_ns - first_chunk_ns) / 1e6 / (chunks - 1) END AS tpot_ms,
       (last_byte_ns - ts_ns) / 1e6 AS duration_ms
FROM (SELECT r.*, r.first_chunk_ns + 1000 * (SELECT COALESCE(SUM(g.value), 0) FROM json_each(r.chunk_gaps_us) g)
             AS last_chunk_ns
      FROM requests r WHERE r.protocol = 'http/1.1');

-- One row per gap between a request's chunks (TPOT percentiles).
CREATE VIEW request_chunks AS
SELECT r.session_id, r.pid, r.conn, r.ts_ns, r.path, g.key + 1 AS chunk, g.value / 1e3 AS gap_ms
FROM requests r, json_each(r.chunk_gaps_us) g;
