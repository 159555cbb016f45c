"""MemstoreConfig refuses settings no part of memstore could keep."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from memstore.config import MemstoreConfig


@pytest.mark.parametrize("timeout", [float("inf"), 1e10, float("nan"), 0, -1])
def test_a_timeout_no_call_could_keep_is_refused(timeout: float) -> None:
    """Was: ``timeout = inf`` was accepted and every LLM call then failed without reaching
    the server (a provider_error: "cannot convert float NaN to integer")."""
    with pytest.raises(ValidationError, match="timeout"):
        MemstoreConfig(timeout=timeout)


def test_a_timeout_of_a_day_is_kept() -> None:
    assert MemstoreConfig(timeout=86_400).timeout == 86_400
