"""The simulator's version: a change to what it writes bumps it, and the cached sample is rebuilt."""

# Bump when the simulator's output changes: the cached default store is keyed by it.
SAMPLE_VERSION = "3"
# Bump when what ``load_into`` writes into a store beside the exported series changes (the
# store's declared SLOs, since "2"): the cached default store is keyed by it too.
STORE_LAYOUT = "2"
