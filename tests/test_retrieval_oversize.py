"""A memory longer than the token budget is shown cut to fit, never silently dropped.

What the agent sees is the most important memories in priority order (DANGER, CORE,
PERMANENT, EPHEMERAL, TENTATIVE; newest first), each whole, until one does not fit: that
one is cut to what is left (its category and title kept, its text shortened and ended with
"…") when at least ``MIN_CUT_TOKENS`` of its text fit, else left out; nothing after it is
shown, and "(N more memories not shown)" counts exactly the memories not shown at all.
A cut leaves ``EXITS_RESERVE`` tokens for the map's exits line (not when the first memory
shown needs them), cuts land on grapheme-cluster boundaries, and a memory that no view
could show (its title alone too long for the budget) is passed over, not in the way of the
memories after it.
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
    EXITS_RESERVE,
    MIN_CUT_TOKENS,
    TENTATIVE_HEADER,
    ContextRow,
    format_location_memory,
    group,
    left_out_line,
)
from memstore.store import MemoryStore
from memstore.tokens import count_tokens, grapheme_end, text_prefix

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
    # the cut fills what the budget leaves but room for the exits line
    assert 290 - EXITS_RESERVE <= count_tokens(shown) <= 300 - EXITS_RESERVE


def test_a_cut_memory_that_is_the_last_needs_no_not_shown_line(tmp_path: Path) -> None:
    with MemoryStore.open(tmp_path / "one.db") as store:
        store.add_memory(1, "Room", memory("Troll", TROLL, "DANGER"))
        shown = store.get_location_memory(1)
    assert "\n" not in shown
    assert shown.startswith("[DANGER] Troll: The troll") and shown.endswith(CUT_MARK)
    assert 295 - EXITS_RESERVE <= count_tokens(shown) <= 300 - EXITS_RESERVE


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
    shown = format_location_memory(rows, 80 + EXITS_RESERVE)
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
    """Less than MIN_CUT_TOKENS of text would fit in the room the memories before it left:
    it is not shown, nor is any of lower priority (the agent never sees a lesser memory in
    place of a greater one that a view could show)."""
    long_title = "Troll " + "very " * 30 + "dangerous"
    rows = [
        ContextRow("NOTE", "Short", "tiny", "ephemeral", "ACTIVE"),
        ContextRow("DANGER", long_title, TROLL, "permanent", "ACTIVE"),
        ContextRow("DANGER", "Axe", "The troll has an axe.", "permanent", "ACTIVE"),
    ]
    first = "[DANGER] Axe: The troll has an axe."  # the newest DANGER memory ranks first
    budget = count_tokens(f"{first}\n[DANGER] {long_title}: ") + MIN_CUT_TOKENS + 4
    shown = format_location_memory(rows, budget)
    assert shown == f"{first}\n(2 more memories not shown)"
    # with a few more tokens the cut shows at least MIN_CUT_TOKENS of the text
    budget += 12 + EXITS_RESERVE
    shown = format_location_memory(rows, budget)
    cut, top, last = shown.splitlines()  # display order: the DANGER memories oldest first
    assert top == first
    assert cut.startswith(f"[DANGER] {long_title}: The troll") and cut.endswith(CUT_MARK)
    shown_text = cut.removeprefix(f"[DANGER] {long_title}: ").removesuffix(CUT_MARK)
    assert count_tokens(shown_text) >= MIN_CUT_TOKENS
    assert last == "(1 more memory not shown)"
    assert count_tokens(shown) <= budget - EXITS_RESERVE


# --- a memory whose title alone is too long for the budget (review finding 6) ------------

OVERSIZED_TITLE = "Troll " + "ꙮ" * 200  # 206 characters (TITLE_MAX is 500), 602 tokens


def test_a_top_memory_whose_title_alone_overflows_does_not_hide_the_others(
    tmp_path: Path,
) -> None:
    """The reviewer's reproduction: it showed only "(3 more memories not shown)"."""
    with MemoryStore.open(tmp_path / "title.db") as store:
        store.add_memory(152, "Troll Room", memory("Lamp needed", "It is dark here.", turn=1))
        store.add_memory(152, "Troll Room", memory("Passage east", "It leads east.", turn=2))
        store.add_memory(
            152, "Troll Room", memory(OVERSIZED_TITLE, "Troll with axe.", "DANGER", turn=3)
        )
        shown = store.get_location_memory(152)
        store._forget(152)  # noqa: SLF001 - a cold read gives the same text
        assert store.get_location_memory(152) == shown
    assert shown == (
        "[NOTE] Lamp needed: It is dark here.\n"
        "[NOTE] Passage east: It leads east.\n"
        "(1 more memory not shown)"
    )


def test_a_memory_no_view_could_show_is_passed_over_wherever_it_ranks() -> None:
    """Second in priority order, an oversized title does not stop the selection either;
    nor does an empty-text memory whose line is longer than the budget. The memories after
    them are taken whole, then cut, by the same rule."""
    rows = [
        ContextRow("NOTE", "Old", TROLL, "permanent", "ACTIVE"),
        ContextRow("NOTE", "Lamp", "A brass lamp.", "permanent", "ACTIVE"),
        ContextRow("DANGER", OVERSIZED_TITLE, "", "permanent", "ACTIVE"),
        ContextRow("DANGER", OVERSIZED_TITLE, "Axe.", "permanent", "ACTIVE"),
        ContextRow("DANGER", "Grue", "It is dark.", "permanent", "ACTIVE"),
    ]
    shown = format_location_memory(rows, 120)
    lines = shown.splitlines()
    assert lines[0].startswith("[NOTE] Old: The troll") and lines[0].endswith(CUT_MARK)
    assert lines[1:] == [
        "[NOTE] Lamp: A brass lamp.",
        "[DANGER] Grue: It is dark.",
        "(2 more memories not shown)",
    ]
    assert count_tokens(shown) <= 120 - EXITS_RESERVE


def test_only_oversized_memories_show_as_not_shown() -> None:
    rows = [ContextRow("DANGER", OVERSIZED_TITLE, "Axe.", "permanent", "ACTIVE")]
    assert format_location_memory(rows, 300) == "(1 more memory not shown)"


# --- room for the map's exits line (review finding 7) -------------------------------------


def test_a_cut_leaves_room_for_the_exits_line(tmp_path: Path) -> None:
    """The reviewer's reproduction: the cut filled the budget (298 of 300) and the exits
    line, shown before the long memory came, was gone."""
    from memstore import SimpleMemoryManager, ZMachineContext

    def move(a: int, b: int) -> ZMachineContext:
        return ZMachineContext(location_before=a, location_after=b)

    with MemoryStore.open(tmp_path / "exits.db") as store:
        manager = SimpleMemoryManager(store)
        assert manager.config.map_exits_line and manager.config.token_budget == 300
        manager.record_action_outcome(1, "West of House", "north", "North of House", move(1, 2))
        manager.record_action_outcome(2, "North of House", "south", "West of House", move(2, 1))
        manager.record_action_outcome(1, "West of House", "east", "It is boarded.", move(1, 1))
        manager.flush()
        manager.add_memory(1, "West of House", memory("Mailbox", "A leaflet is in it."))
        before = manager.get_location_memory(1)
        exits = before.splitlines()[-1]
        assert exits.startswith("Exits: north → North of House (2); untried: south")
        grue = "It is dark and a grue lurks; never go without the lamp. " * 40
        manager.add_memory(1, "West of House", memory("Grue", grue, "DANGER", turn=2))
        shown = manager.get_location_memory(1)
    lines = shown.splitlines()
    assert lines[0].startswith("[DANGER] Grue: It is dark") and lines[0].endswith(CUT_MARK)
    assert lines[-1] == exits  # the whole line, as before the long memory came
    assert count_tokens(shown) <= 300


def test_the_exits_reserve_is_given_up_for_the_first_memory_shown() -> None:
    """With a small budget the top memory shows cut into the reserve rather than not at all;
    a later memory that could show only by taking the reserve is left out."""
    top = [ContextRow("DANGER", "Troll", TROLL, "permanent", "ACTIVE")]
    budget = count_tokens("[DANGER] Troll: ") + MIN_CUT_TOKENS + 6
    assert budget < EXITS_RESERVE
    shown = format_location_memory(top, budget)
    assert shown.startswith("[DANGER] Troll: The troll") and shown.endswith(CUT_MARK)
    rows = [ContextRow("NOTE", "Troll", TROLL, "permanent", "ACTIVE"), *top]
    first = "[DANGER] Axe: The troll has an axe."
    rows = [*rows, ContextRow("DANGER", "Axe", "The troll has an axe.", "permanent", "ACTIVE")]
    budget = count_tokens(first) + 1 + 20 + EXITS_RESERVE
    shown = format_location_memory(rows, budget)
    assert shown == f"{first}\n(2 more memories not shown)"  # 20 tokens: no room to cut
    cut, top, last = format_location_memory(rows, budget, cut_reserve=0).splitlines()
    assert cut.startswith("[DANGER] Troll: The troll") and cut.endswith(CUT_MARK)
    assert (top, last) == (first, "(1 more memory not shown)")


# --- cuts at grapheme-cluster boundaries (review finding 8) -------------------------------

CLUSTERS = {
    "family emoji (ZWJ)": "👨\u200d👩\u200d👧 ",
    "flag (regional indicators)": "🇫🇷",
    "combining accent": "e\u0301",
    "Devanagari conjunct (virama)": "\u0915\u094d\u0937",
    "skin tone": "👍🏽",
    "keycap": "1\ufe0f\u20e3",
    "tag sequence": "🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f",
}


@pytest.mark.parametrize("unit", list(CLUSTERS.values()), ids=list(CLUSTERS))
def test_a_cut_never_splits_a_grapheme_cluster(unit: str) -> None:
    """Each text is one cluster repeated: a cut keeps a whole number of them."""
    text = unit * 300
    whole = {(unit * count).rstrip() for count in range(301)}
    for budget in range(30, 80):
        shown = format_location_memory(
            [ContextRow("NOTE", "T", text, "permanent", "ACTIVE")], budget, cut_reserve=0
        )
        assert shown.startswith("[NOTE] T: ") and shown.endswith(CUT_MARK), budget
        kept = shown.removeprefix("[NOTE] T: ").removesuffix(CUT_MARK)
        assert kept in whole, (budget, kept[-6:])
        assert count_tokens(shown) <= budget


def test_text_prefix_backs_off_to_a_grapheme_boundary() -> None:
    from memstore.tokens import grapheme_end

    text = "ab🇫🇷🇩🇪e\u0301x👨\u200d👩"
    assert grapheme_end(text, 3) == 2  # between the two regional indicators of a flag
    assert grapheme_end(text, 4) == 4  # between two flags
    assert grapheme_end(text, 5) == 4
    assert grapheme_end(text, 7) == 6  # before the combining accent
    assert grapheme_end(text, 8) == 8
    assert grapheme_end(text, 10) == 9  # before the zero-width joiner
    assert grapheme_end(text, 11) == 9  # after it
    assert grapheme_end(text, len(text)) == len(text)
    zalgo = "a" + "\u0301" * 200
    assert grapheme_end(zalgo, 150) == 150  # no boundary near: the token cut stands


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
WORDS += ["e\u0301", "🇫🇷", "👨\u200d👩", "क्ष", "👍🏽"]  # clusters of several characters
texts = st.lists(st.sampled_from(WORDS), max_size=400).map(" ".join)
row = st.tuples(
    st.sampled_from(["NOTE", "DANGER", "SUCCESS", "FAILURE", "DISCOVERY"]),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=60).map(" ".join),
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
    """Within the budget; what shows is the first memories in priority order, the last
    possibly cut (at a grapheme boundary, leaving EXITS_RESERVE unless it is the first
    shown), passing over only memories no view could show: the top memory shows at least
    partly unless its title alone is too long for the budget."""
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

    def parts(index: int) -> tuple[str, str]:
        r = rows[index]
        indent = "  " if r.status == "TENTATIVE" else ""
        marker = {"core": " [spawn]", "ephemeral": " [session]"}.get(r.persistence, "")
        return f"{indent}[{r.category}] {r.title}: ", marker if markers else ""

    def fits_alone(index: int, slack: int) -> bool:
        """Could the memory show in a view of its own (whole, or MIN_CUT_TOKENS of its
        text and the mark), room kept for the tentative header and a "not shown" line?
        Counted apart from retrieval's own rule, give or take ``slack`` tokens (tokens
        do not add up exactly across the joins)."""
        r, (head, marker) = rows[index], parts(index)
        room = budget - (count_tokens(left_out_line(len(rows))) + 1 if len(rows) > 1 else 0)
        room -= count_tokens(TENTATIVE_HEADER) + 2 if r.status == "TENTATIVE" else 0
        least = count_tokens(head + r.text + marker) + 1
        for limit in range(MIN_CUT_TOKENS, count_tokens(r.text)):  # the shortest cut
            start = text_prefix(r.text, limit).rstrip()  # (a cluster may take more)
            if count_tokens(start) >= MIN_CUT_TOKENS and len(start) < len(r.text.rstrip()):
                least = min(least, count_tokens(head + start + CUT_MARK + marker) + 1)
                break
        return least <= room + slack

    ranked = sorted(range(len(rows)), key=rank)
    lines = [line for line in shown.splitlines() if line and line != TENTATIVE_HEADER]
    hidden = 0
    if lines and lines[-1].endswith("not shown)") and lines[-1].startswith("("):
        hidden = int(lines.pop()[1:].split()[0])
    shown_ids = [int(line.split("] T", 1)[1].split(" ", 1)[0].rstrip(":")) for line in lines]
    assert len(shown_ids) + hidden == len(rows)
    # what is shown is the first memories in priority order but those no view could show
    order = sorted(shown_ids, key=rank)
    before = ranked[: ranked.index(order[-1])] if order else ranked
    passed_over = [index for index in before if index not in shown_ids]
    for index in passed_over:
        assert not fits_alone(index, -2), index
    assert order == [index for index in ranked if index not in passed_over][: len(order)]
    for line, index in zip(lines, shown_ids, strict=True):
        r, (head, marker) = rows[index], parts(index)
        assert line.startswith(head) and line.endswith(marker)  # the title is always whole
        if line != head + r.text + marker:  # cut: only the last shown, in priority order
            assert index == order[-1]
            kept = line.removeprefix(head).removesuffix(marker)
            assert kept.endswith(CUT_MARK)
            kept = kept.removesuffix(CUT_MARK)
            assert r.text.startswith(kept) and len(kept) < len(r.text)
            assert count_tokens(kept) >= MIN_CUT_TOKENS
            assert grapheme_end(r.text, len(kept)) == len(kept)
            if index != order[0]:  # room left for the exits line
                assert count_tokens(shown) <= budget - EXITS_RESERVE
    if order:
        assert fits_alone(order[0], 2)


def test_without_the_exits_line_a_cut_uses_the_whole_budget(tmp_path: Path) -> None:
    """The reserve is the exits line's: a store whose config shows no exits line keeps none."""
    grue = "It is dark and a grue lurks; never go without the lamp. " * 40
    shown = {}
    for exits in (True, False):
        config = MemstoreConfig(map_exits_line=exits)
        with MemoryStore.open(tmp_path / f"{exits}.db", config=config) as store:
            store.add_memory(1, "West of House", memory("Grue", grue, "DANGER"))
            shown[exits] = count_tokens(store.get_location_memory(1))
    assert shown[True] <= 300 - EXITS_RESERVE < shown[False] <= 300
