"""The help text a configuration dataclass carries for each field, read one way everywhere.

Every setting is a dataclass field whose ``metadata["help"]`` says what it means; CLI flags,
sidebar tooltips and page widgets show that text, so they all read it here.

>>> from analytics.view import ViewSettings
>>> field_help(ViewSettings, "step_s")[:13]
'Analysis step'
"""

from __future__ import annotations

from dataclasses import fields


def fields_help(cls: type) -> dict[str, str]:
    """Field name -> its help text ("" where a field has none), in the class's order."""
    return {f.name: str(f.metadata.get("help", "")) for f in fields(cls)}


def field_help(cls: type, name: str) -> str:
    """The help text of ``cls``'s field ``name``; ``KeyError`` for a field it does not have."""
    return fields_help(cls)[name]
