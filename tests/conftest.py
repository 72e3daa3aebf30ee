"""Shared fixtures: an in-memory store that is always closed, and paths to fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from analytics.store import Store

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def store():
    st = Store(":memory:")
    try:
        yield st
    finally:
        st.close()


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES
