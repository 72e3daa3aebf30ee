"""The simulator's version: a change to what it writes bumps it, and the cached sample is rebuilt."""

# Bump when the simulator's output changes: the cached default store is keyed by it.
SAMPLE_VERSION = "3"
