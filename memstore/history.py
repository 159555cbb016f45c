"""Supersession histories as pure functions over loaded memories and their links."""

from __future__ import annotations


def oldest_first(
    keys: set[tuple[str, int]],
    edges: list[tuple[tuple[str, int], tuple[str, int]]],
    order: dict[tuple[str, int], int],
) -> list[tuple[str, int]]:
    """Every superseded memory before its successor; otherwise in the order loaded."""
    pending = {key: 0 for key in keys}
    for old, new in edges:
        if old in keys and new in keys:
            pending[new] += 1
    result: list[tuple[str, int]] = []
    ready = sorted((key for key, n in pending.items() if n == 0), key=order.__getitem__)
    while ready:
        key = ready.pop(0)
        result.append(key)
        for old, new in edges:
            if old == key and new in pending:
                pending[new] -= 1
                if pending[new] == 0:
                    ready.append(new)
                    ready.sort(key=order.__getitem__)
    return result
