"""SQL of the pool what-if model: what the store says about the pool's hardware."""

# GPU models (dcgm-exporter's ``modelName`` label, kept in ``series.model``) with how many
# distinct GPUs report each, most GPUs first; a GPU is its UUID, else host and index.
GPU_MODELS = """
SELECT model,
       count(DISTINCT coalesce(uuid, hostname || '/' || gpu)) AS gpus
FROM series
WHERE model IS NOT NULL AND trim(model) <> ''
GROUP BY model
ORDER BY gpus DESC, model
"""
