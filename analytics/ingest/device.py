"""What a GPU is in a mapped table: a mapping's ``[device]`` table, and the warning when it is missing.

A GPU is keyed by its ``UUID`` label, else its ``hostname`` and ``gpu`` labels as a pair
(:func:`analytics.timeline.pool.gpu_key`; written ``host/gpu`` in words by :func:`gpu_key_text`). A
pod-level table (``timestamp, container_ip, duty_cycle``) has neither, so every pod in it would be
one GPU. The mapping says what identifies a GPU instead::

    [device]
    per = "pod"                       # one GPU per pod (the column [labels] maps to "pod")
    # or
    columns = ["node", "gpu_index"]   # the column(s) that together identify one GPU

and the load writes that identity as each row's ``UUID`` label: ``pod/<pod>``, or the columns'
values joined with ``/``, each value's ``%`` and ``/`` written ``%25`` and ``%2F`` first (percent-encoding,
which :func:`urllib.parse.unquote` reads back), so that node ``a/b`` GPU ``c`` and node ``a`` GPU
``b/c`` stay two GPUs (both were ``a/b/c``). A load of device signals without
it, where more than :data:`FEW_PODS` pods share one GPU key at the same time, says so in its note
(:func:`shared_note`); ``tidelens signals`` says the same of the store
(:func:`analytics.timeline.inventory.shared_gpu_keys`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from analytics import signals as sg
from analytics.errors import ConfigError
from analytics.labels import NORMALISED_LABELS

# More pods than this on one GPU key at one time is no GPU (time-slicing shares a GPU among a few).
FEW_PODS = 8
DEVICE_METRICS = (sg.DCGM_GR_ENGINE_ACTIVE, sg.DCGM_GPU_UTIL, sg.DCGM_FB_USED, sg.DCGM_POWER)
UUID_LABEL = "UUID"


def read_device_table(p: Path, doc: dict[str, Any]) -> tuple[tuple[str, ...], str | None]:
    """``(columns, per)`` of a mapping's ``[device]`` table (both empty without one)."""
    t = doc.get("device")
    if t is None:
        return (), None
    if not isinstance(t, dict):
        raise ConfigError(f"{p}: device must be a table: write [device] on a line of its own, then per = \"pod\" "
                          "or columns = [\"<column>\"]")
    unknown = sorted(set(t) - {"columns", "per"})
    if unknown:
        raise ConfigError(f"{p}: [device] has no key {unknown[0]!r}; its keys: columns, per")
    cols = t.get("columns", [])
    if isinstance(cols, str):
        cols = [cols]
    if not isinstance(cols, list) or not all(isinstance(c, str) and c.strip() for c in cols):
        raise ConfigError(f"{p}: [device] columns must name columns: write columns = [\"node\", \"gpu_index\"]")
    per = t.get("per")
    if per is not None and not isinstance(per, str):
        raise ConfigError(f"{p}: [device] per must be a string: write per = \"pod\"")
    return tuple(cols), per


def check_device(columns: tuple[str, ...], per: str | None, labels: dict[str, str], where: str) -> None:
    """Refuse a ``[device]`` that cannot say what a GPU is."""
    if per is not None and columns:
        raise ConfigError(f"{where}: [device] takes per = \"pod\" or columns = [...], not both")
    if per is not None and per != "pod":
        raise ConfigError(f"{where}: [device] per = {per!r}: only per = \"pod\" (one GPU per pod), or name the "
                          "columns that identify a GPU with columns = [...]")
    if per == "pod" and "pod" not in labels.values():
        raise ConfigError(f"{where}: [device] per = \"pod\" needs a column mapped to the pod label: write "
                          "[labels] <column> = \"pod\"")
    if (per or columns) and set(labels.values()) & set(NORMALISED_LABELS["uuid"]):
        raise ConfigError(f"{where}: [device] and a [labels] column mapped to a UUID both say what a GPU is; "
                          "keep one")


def device_label(columns: tuple[str, ...], per: str | None, labels: dict[str, str]) -> pl.Expr | None:
    """The ``UUID`` label of each row of the table (None without a ``[device]``)."""
    if per == "pod":
        col = next(c for c, label in labels.items() if label == "pod")
        return pl.concat_str(pl.lit("pod/"), pl.col(col)).alias(UUID_LABEL)
    if columns:
        return pl.concat_str([_key_part(c) for c in columns], separator="/").alias(UUID_LABEL)
    return None


def _key_part(column: str) -> pl.Expr:
    """One column's value as a part of a GPU key (:func:`_encoded`; empty where null)."""
    return _encoded(pl.col(column).cast(pl.Utf8).fill_null(""))


def _encoded(text: pl.Expr) -> pl.Expr:
    """``%`` then ``/`` percent-encoded, so a key joined with ``/`` splits back into the values it
    was made of (the one encoding, not only the separator)."""
    return text.str.replace_all("%", "%25", literal=True).str.replace_all("/", "%2F", literal=True)


def gpu_key_text(host: pl.Expr, gpu: pl.Expr) -> pl.Expr:
    """A GPU key without a UUID (host and index) as a message shows it: ``host/gpu``, each value
    encoded as a ``[device]`` column's is (host ``a/b`` GPU ``c`` reads ``a%2Fb/c``, host ``a`` GPU
    ``b/c`` reads ``a/b%2Fc``), ``?`` where the label is missing. For words only: GPUs are told
    apart by the pair (:func:`analytics.timeline.pool.gpu_key`), never by this text."""
    return pl.concat_str(_encoded(host).fill_null("?"), pl.lit("/"), _encoded(gpu).fill_null("?"))


def shared_note(long: pl.DataFrame, label_names: list[str]) -> str | None:
    """A note when more than :data:`FEW_PODS` pods share one GPU key at one time in ``long``
    (``metric, ts_ms`` and a column per label) among its device signals; None otherwise."""
    if "pod" not in label_names or set(label_names) & set(NORMALISED_LABELS["uuid"]):
        return None
    dev = long.filter(pl.col("metric").is_in(DEVICE_METRICS) & pl.col("pod").is_not_null())
    if dev.height == 0:
        return None
    host = next((c for c in NORMALISED_LABELS["hostname"] if c in label_names), None)
    gpu = next((c for c in NORMALISED_LABELS["gpu"] if c in label_names), None)
    nothing = pl.lit(None, pl.Utf8)
    # the pair, never one joined text: host a/b GPU c and host a GPU b/c are two GPUs
    pair = (pl.col(host) if host else nothing).alias("_host"), (pl.col(gpu) if gpu else nothing).alias("_gpu")
    worst = (dev.group_by(*pair, "ts_ms").agg(pl.col("pod").n_unique().alias("pods"))
             .with_columns(gpu_key_text(pl.col("_host"), pl.col("_gpu")).alias("_gpu_key"))
             .sort("pods", "_gpu_key", descending=[True, False]).head(1))
    pods, gpu_key = int(worst["pods"][0]), str(worst["_gpu_key"][0])
    if pods <= FEW_PODS:
        return None
    none = worst["_host"][0] is None and worst["_gpu"][0] is None
    missing = "no UUID, hostname or gpu column" if none else "no UUID column"
    return (f"{pods} pods share one GPU key ({gpu_key!r}: {missing}) at the same time, so they count as one GPU; "
            "say what a GPU is in the mapping: [device] per = \"pod\" (one GPU per pod) or columns = [\"...\"]")
