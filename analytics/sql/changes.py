"""SQL of the changes a user recorded: when the pool's policy changed, and to what."""

# One row per change: its time and policy are its identity (recording the same change again
# replaces its parameters and changes nothing else). Parameters a policy does not take are null.
CHANGES_CREATE = """
CREATE TABLE IF NOT EXISTS changes (
    at_ms             BIGINT NOT NULL,    -- UTC epoch ms the policy took effect
    policy            VARCHAR NOT NULL,   -- one of analytics.whatif.POLICIES
    reservation_gpus  INTEGER,            -- GPUs reserved for inference
    release_hour      DOUBLE,             -- polite: the hour batch releases its GPUs
    tidal_start_hour  DOUBLE,             -- tidal / MIG: the window batch is admitted in
    tidal_end_hour    DOUBLE,
    mig_profile       VARCHAR,            -- MIG: the profile inference runs on
    replicas_per_gpu  INTEGER,            -- time-slicing: pods sharing one GPU
    note              VARCHAR,
    source            VARCHAR NOT NULL,   -- who recorded it (the CLI, the What-if page, a candidate confirmed)
    PRIMARY KEY (at_ms, policy)
)
"""
HAS_CHANGES_TABLE = "SELECT count(*) FROM information_schema.tables WHERE table_name = 'changes'"
CHANGE_UPSERT = """
INSERT OR REPLACE INTO changes (at_ms, policy, reservation_gpus, release_hour, tidal_start_hour,
                                tidal_end_hour, mig_profile, replicas_per_gpu, note, source)
VALUES ($at_ms, $policy, $reservation_gpus, $release_hour, $tidal_start_hour, $tidal_end_hour,
        $mig_profile, $replicas_per_gpu, $note, $source)
"""
CHANGES_LIST = """
SELECT at_ms, policy, reservation_gpus, release_hour, tidal_start_hour, tidal_end_hour, mig_profile,
       replicas_per_gpu, note, source
FROM changes ORDER BY at_ms, policy
"""
CHANGE_DELETE = "DELETE FROM changes WHERE at_ms = $at_ms AND policy = $policy"

# When each MIG profile's first and last samples were: MIG instances that appear part-way
# through the store are a change someone made.
MIG_PROFILE_SPANS = """
SELECT s.mig_profile, count(DISTINCT s.id) AS series, min(x.ts_ms) AS first_ts_ms, max(x.ts_ms) AS last_ts_ms
FROM series s JOIN samples x ON x.series_id = s.id
WHERE s.mig_profile IS NOT NULL AND s.mig_profile <> ''
GROUP BY s.mig_profile ORDER BY s.mig_profile
"""
DATA_SPAN = "SELECT min(ts_ms), max(ts_ms) FROM samples"

# A Kueue ClusterQueue's nominal GPU quota over time (kueue_cluster_queue_nominal_quota, Kueue's
# own metric, when the store has it): a step in it is a change of the batch's share.
QUEUE_QUOTA = """
SELECT json_extract_string(s.labels, '$.cluster_queue') AS cluster_queue, x.ts_ms, x.value
FROM series s JOIN samples x ON x.series_id = s.id
WHERE s.metric = 'kueue_cluster_queue_nominal_quota'
  AND coalesce(json_extract_string(s.labels, '$.resource'), '') IN ('nvidia.com/gpu', 'nvidia_com_gpu', '')
ORDER BY cluster_queue, x.ts_ms
"""
