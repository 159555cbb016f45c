"""A memory longer than the token budget is shown cut to fit, never silently dropped.

What the agent sees is the most important memories in priority order (DANGER, CORE,
PERMANENT, EPHEMERAL, TENTATIVE; newest first), each whole, until one does not fit: that
one is cut to what is left (its category and title kept, its text shortened and ended with
"…") when at least ``MIN_CUT_TOKENS`` of its text fit, else left out; nothing after it is
shown, and "(N more memories not shown)" counts exactly the memories not shown at all.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore.config import MemstoreConfig
from memstore.models import Memory
from memstore.retrieval import (
    CUT_MARK,
    MIN_CUT_TOKENS,
    TENTATIVE_HEADER,
    ContextRow,
    format_location_memory,
    group,
)
from memstore.store import MemoryStore
from memstore.tokens import count_tokens

TROLL = (
    "The troll swings his bloody axe the moment you enter from the west; fighting him "
    "unarmed or with the lamp is fatal, and giving him food only delays the attack. "
) * 10


def memory(
    title: str,
    text: str,
    category: str = "NOTE",
    persistence: str = "permanent",
    status: str = "ACTIVE",
    turn: int = 1,
) -> Memory:
    return Memory(
        category=category,
        title=title,
        text=text,
        episode=1,
        turns=str(turn),
        persistence=persistence,
        status=status,
    )


def test_a_danger_memory_longer_than_the_budget_is_shown_cut_not_replaced(tmp_path: Path) -> None:
    """The reviewer's reproduction: it used to show only the NOTE and "(1 more ...)"."""
    with MemoryStore.open(tmp_path / "big.db") as store:
        store.add_memory(
            152,
            "The Troll Room",
            memory("Troll kills unarmed players", TROLL, "DANGER", turn=12),
        )
        store.add_memory(
            152, "The Troll Room", memory("Passage east", "A passage leads east.", turn=13)
        )
        shown = store.get_location_memory(152)
        store._forget(152)  # noqa: SLF001 - a cold read gives the same text
        assert store.get_location_memory(152) == shown
    lines = shown.splitlines()
    assert count_tokens(shown) <= 300
    assert lines[0].startswith(
        "[DANGER] Troll kills unarmed players: The troll swings his bloody axe the moment"
    )
    assert lines[0].endswith(CUT_MARK)
    assert TROLL.startswith(lines[0].removeprefix("[DANGER] Troll kills unarmed players: ")[:-1])
    assert "Passage east" not in shown  # lower priority: the DANGER memory had the room
    assert lines[1:] == ["(1 more memory not shown)"]
    assert count_tokens(shown) >= 290  # the cut fills what the budget leaves


def test_a_cut_memory_that_is_the_last_needs_no_not_shown_line(tmp_path: Path) -> None:
    with MemoryStore.open(tmp_path / "one.db") as store:
        store.add_memory(1, "Room", memory("Troll", TROLL, "DANGER"))
        shown = store.get_location_memory(1)
    assert "\n" not in shown
    assert shown.startswith("[DANGER] Troll: The troll") and shown.endswith(CUT_MARK)
    assert 295 <= count_tokens(shown) <= 300


def test_a_cut_keeps_the_tier_marker_after_the_cut_mark() -> None:
    rows = [ContextRow("NOTE", "Trap door", TROLL, "core", "ACTIVE")]
    shown = format_location_memory(rows, 60)
    assert shown.startswith("[NOTE] Trap door: The troll")
    assert shown.endswith(CUT_MARK + " [spawn]")
    assert count_tokens(shown) <= 60
    assert format_location_memory(rows, 60, show_markers=False).endswith(CUT_MARK)


def test_a_tentative_memory_is_cut_under_its_header() -> None:
    rows = [
        ContextRow("NOTE", "Lamp here", "A brass lamp.", "permanent", "ACTIVE"),
        ContextRow("DANGER", "Maybe a grue", TROLL, "ephemeral", "TENTATIVE"),
    ]
    shown = format_location_memory(rows, 80)
    lines = shown.splitlines()
    assert lines[:3] == ["[NOTE] Lamp here: A brass lamp.", "", TENTATIVE_HEADER]
    assert lines[3].startswith("  [DANGER] Maybe a grue: The troll")
    assert lines[3].endswith(CUT_MARK + " [session]")
    assert len(lines) == 4
    assert count_tokens(shown) <= 80


def test_display_order_is_kept_when_a_memory_is_cut() -> None:
    """The cut memory still shows in display order (persistent before ephemeral, oldest
    first), not at the end."""
    rows = [
        ContextRow("NOTE", "Old fact", TROLL, "permanent", "ACTIVE"),
        ContextRow("DANGER", "Grue", "It is dark.", "permanent", "ACTIVE"),
        ContextRow("NOTE", "Session fact", "Door open.", "ephemeral", "ACTIVE"),
    ]
    shown = format_location_memory(rows, 100)
    lines = shown.splitlines()
    assert lines[0].startswith("[NOTE] Old fact: The troll") and CUT_MARK in lines[0]
    assert lines[1] == "[DANGER] Grue: It is dark."
    assert lines[2:] == ["(1 more memory not shown)"]  # the ephemeral one ranks after
    assert count_tokens(shown) <= 100


def test_a_memory_with_too_little_room_for_its_text_is_left_out_with_all_after_it() -> None:
    """Less than MIN_CUT_TOKENS of text would fit: the memory is not shown, nor is any of
    lower priority (the agent never sees a lesser memory in place of a greater one)."""
    long_title = "Troll " + "very " * 30 + "dangerous"
    rows = [
        ContextRow("NOTE", "Short", "tiny", "ephemeral", "ACTIVE"),
        ContextRow("DANGER", long_title, TROLL, "permanent", "ACTIVE"),
    ]
    budget = count_tokens(f"[DANGER] {long_title}: ") + MIN_CUT_TOKENS + 4
    shown = format_location_memory(rows, budget)
    assert shown == "(2 more memories not shown)"
    # with a few more tokens the cut shows at least MIN_CUT_TOKENS of the text
    shown = format_location_memory(rows, budget + 12)
    first, last = shown.splitlines()
    assert first.startswith(f"[DANGER] {long_title}: The troll") and first.endswith(CUT_MARK)
    shown_text = first.removeprefix(f"[DANGER] {long_title}: ").removesuffix(CUT_MARK)
    assert count_tokens(shown_text) >= MIN_CUT_TOKENS
    assert last == "(1 more memory not shown)"
    assert count_tokens(shown) <= budget + 12


def test_memories_that_fit_whole_are_never_cut() -> None:
    rows = [ContextRow("NOTE", f"Fact {n}", "word " * 5, "permanent", "ACTIVE") for n in range(3)]
    shown = format_location_memory(rows, 300)
    assert CUT_MARK not in shown
    assert len(shown.splitlines()) == 3


def test_the_not_shown_count_is_exact_when_a_memory_is_cut(tmp_path: Path) -> None:
    config = MemstoreConfig(token_budget=120)
    with MemoryStore.open(tmp_path / "count.db", config=config) as store:
        for n in range(6):
            store.add_memory(3, "Cellar", memory(f"Fact {n}", "word " * 12, turn=n + 1))
        store.add_memory(3, "Cellar", memory("Grue", TROLL, "DANGER", turn=9))
        shown = store.get_location_memory(3)
    lines = shown.splitlines()
    assert count_tokens(shown) <= 120
    assert lines[0].startswith("[DANGER] Grue: The troll") and lines[0].endswith(CUT_MARK)
    assert lines[-1] == f"({7 - (len(lines) - 1)} more memories not shown)"


@pytest.fixture
def estimated_tokens(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Tokens estimated (4 characters a token), as when tiktoken or its file is missing."""
    import memstore.retrieval as retrieval
    import memstore.tokens as tokens

    caches = (tokens.count_tokens, tokens.text_prefix, retrieval._cut)  # noqa: SLF001
    for cache in caches:
        cache.cache_clear()
    monkeypatch.setattr(tokens, "TOKENIZER", "estimate (4 characters per token)")
    monkeypatch.setattr(tokens, "_encode", None)
    monkeypatch.setattr(tokens, "_decode", None)
    yield
    for cache in caches:
        cache.cache_clear()


@pytest.mark.usefixtures("estimated_tokens")
def test_a_long_memory_is_cut_with_the_estimate_too() -> None:
    rows = [
        ContextRow("NOTE", "Passage east", "A passage leads east.", "permanent", "ACTIVE"),
        ContextRow("DANGER", "Troll kills unarmed players", TROLL, "permanent", "ACTIVE"),
    ]
    shown = format_location_memory(rows, 300)
    first, last = shown.splitlines()
    assert first.startswith("[DANGER] Troll kills unarmed players: The troll swings")
    assert first.endswith(CUT_MARK) and last == "(1 more memory not shown)"
    assert (len(shown) + 3) // 4 <= 300  # the estimate's own count


# --- property: the budget is never exceeded, and the top memory shows first --------------

WORDS = ["the", "troll", "axe", "lamp", "grue", "é", "…", "!!", "  ", "42", "中文", "ß", "-"]
texts = st.lists(st.sampled_from(WORDS), max_size=400).map(" ".join)
row = st.tuples(
    st.sampled_from(["NOTE", "DANGER", "SUCCESS", "FAILURE", "DISCOVERY"]),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=25).map(" ".join),
    texts,
    st.sampled_from(["core", "permanent", "ephemeral"]),
    st.sampled_from(["ACTIVE", "TENTATIVE"]),
)


@pytest.mark.property
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(row, max_size=12), st.integers(min_value=20, max_value=400), st.booleans())
def test_the_block_stays_within_budget_and_shows_the_top_memory_first(
    raw: list[tuple[str, str, str, str, str]], budget: int, markers: bool
) -> None:
    rows = [
        ContextRow(category, f"T{index} {title}", text, persistence, status)
        for index, (category, title, text, persistence, status) in enumerate(raw)
    ]
    shown = format_location_memory(rows, budget, show_markers=markers)
    assert count_tokens(shown) <= budget
    if not rows:
        assert shown == ""
        return

    # priority: group, then the newest first (format_location_memory's rows are one tier)
    def rank(index: int) -> tuple[int, int]:
        r = rows[index]
        return (group(r.category, r.persistence, r.status), -index)

    ranked = sorted(range(len(rows)), key=rank)
    lines = [line for line in shown.splitlines() if line and line != TENTATIVE_HEADER]
    hidden = 0
    if lines and lines[-1].endswith("not shown)") and lines[-1].startswith("("):
        hidden = int(lines.pop()[1:].split()[0])
    shown_ids = [int(line.split("] T", 1)[1].split(" ", 1)[0].rstrip(":")) for line in lines]
    assert len(shown_ids) + hidden == len(rows)
    # what is shown is the first memories in priority order, at most the last of them cut
    assert sorted(shown_ids, key=rank) == ranked[: len(shown_ids)]
    order = sorted(shown_ids, key=rank)
    for line, index in zip(lines, shown_ids, strict=True):
        r = rows[index]
        indent = "  " if r.status == "TENTATIVE" else ""
        head = f"{indent}[{r.category}] {r.title}: "  # the title is always whole
        marker = {"core": " [spawn]", "ephemeral": " [session]"}.get(r.persistence, "")
        marker = marker if markers else ""
        assert line.startswith(head) and line.endswith(marker)
        if line != head + r.text + marker:  # cut: only the last shown, in priority order
            assert index == order[-1]
            kept = line.removeprefix(head).removesuffix(marker)
            assert kept.endswith(CUT_MARK)
            kept = kept.removesuffix(CUT_MARK)
            assert r.text.startswith(kept) and len(kept) < len(r.text)
            assert count_tokens(kept) >= MIN_CUT_TOKENS
    if shown_ids:
        assert ranked[0] in shown_ids  # the top-priority memory, at least partly
