"""SQL of the audit record: who loaded, pulled or changed what, and when (analytics.audit)."""

AUDIT_CREATE = """
CREATE TABLE IF NOT EXISTS audit (
    changed_at  TIMESTAMPTZ NOT NULL,
    who         VARCHAR NOT NULL,   -- the signed-in user, "local operator", or "visitor"
    role        VARCHAR NOT NULL,
    action      VARCHAR NOT NULL,   -- load | pull | collect | mapping | map
    outcome     VARCHAR NOT NULL,   -- loaded | failed | saved | refused (a pull)
    what        VARCHAR NOT NULL,   -- the file, server or config file, as it may be shown
    sources     VARCHAR NOT NULL,   -- JSON list of {name, hash, status}: what it loaded
    map_before  VARCHAR,            -- digest of the workload map before (analytics.workloads.map_digest)
    map_after   VARCHAR
)
"""
AUDIT_INSERT = """
INSERT INTO audit VALUES (to_timestamp($at_ms / 1000.0), $who, $role, $action, $outcome, $what, $sources,
                          $map_before, $map_after)
"""
HAS_AUDIT_TABLE = "SELECT count(*) FROM information_schema.tables WHERE table_name = 'audit'"
AUDIT_LIST = """
SELECT changed_at AS at, who, role, action, outcome, what, sources, map_before, map_after
FROM audit ORDER BY changed_at DESC LIMIT $limit
"""
# The sources a load, pull or collection wrote: those after the last id before it began.
SOURCES_MAX_ID = "SELECT coalesce(max(id), 0) FROM sources"
SOURCES_SINCE = "SELECT name, content_hash, status FROM sources WHERE id > $after ORDER BY id"
