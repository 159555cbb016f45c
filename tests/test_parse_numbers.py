"""Numbers in Memories.md must fit the database: out of range is a problem at its line.

SQLite keeps integers as signed 64-bit numbers. A number the file holds outside that
range (or an episode below 1 in a location's episode list) is reported by the parser at
its line and its memory or location skipped, by both readers alike; it never reaches
the database as an ``OverflowError`` or a failed CHECK at ``memstore import --apply``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from exporters import parse_memories_md, render_memories_md
from exporters.parse import ParseResult, parse_line_by_line, read_canonical
from memstore.models import MAX_EPISODE, Status
from memstore.store import MemoryStore
from tests.cli_helpers import run
from tests.conftest import MakeMemory

TOO_BIG = 2**63  # one more than SQLite's largest integer
BIGGEST = 2**63 - 1
SMALLEST = -(2**63)


def memories_md(
    *,
    location: object = 5,
    visits: object = 1,
    episodes: str = "1, 2",
    header: str = "**[NOTE - PERMANENT] Lamp** *(Ep1, T3, +5)*",
    reference: str | None = None,
) -> str:
    """A one-location, one-memory file in the renderer's layout; the memory's header is
    line 8, its reference line (if any) line 9."""
    lines = [
        "# Location Memories",
        "",
        f"## Location {location}: Room",
        f"**Visits:** {visits} | **Episodes:** {episodes}",
        "",
        "### Memories",
        "",
        header,
        *([reference] if reference is not None else []),
        "~~It glows.~~" if reference is not None else "It glows.",
        "",
        "---",
        "",
    ]
    return "\n".join(lines)


def both_readers(text: str) -> ParseResult:
    """What parse_memories_md reads; the line parser reads the same."""
    result = parse_memories_md(text)
    assert parse_line_by_line(text) == result
    return result


SUPERSEDED_START = "**[NOTE - PERMANENT - SUPERSEDED] Lamp** "
SUPERSEDED = SUPERSEDED_START + "*(Ep1, T3)*"


def header(metadata: str) -> str:
    return f"**[NOTE - PERMANENT] Lamp** *({metadata})*"


# name: (the file with the number n, the line of n, what a problem names, whether a
# problem keeps the location); each file is read with n = 2**63 (a problem) and with
# n = 2**63 - 1 (read as it is), or for the lost score with -(2**63) - 1 and -(2**63)
OUT_OF_RANGE: dict[str, tuple[Callable[[int], str], int, str, bool]] = {
    "location id": (lambda n: memories_md(location=n), 3, "location id", False),
    "visit count": (lambda n: memories_md(visits=n), 4, "visit count", False),
    "episode list": (lambda n: memories_md(episodes=f"1, {n}"), 4, "episode", False),
    "memory episode": (lambda n: memories_md(header=header(f"Ep{n}, T3")), 8, "episode", True),
    "turn": (lambda n: memories_md(header=header(f"Ep1, T{n}")), 8, "turn", True),
    "turn range end": (lambda n: memories_md(header=header(f"Ep1, T3-{n}")), 8, "turn", True),
    "score gained": (
        lambda n: memories_md(header=header(f"Ep1, T3, +{n}")),
        8,
        "score change",
        True,
    ),
    "score lost": (
        lambda n: memories_md(header=header(f"Ep1, T3, {-n - 1}")),
        8,
        "score change",
        True,
    ),
    "older header": (
        lambda n: memories_md(header=f"**[NOTE] Lamp** *(Epep_{n}, T3)*"),
        8,
        "episode",
        True,
    ),
    "reference episode": (
        lambda n: memories_md(header=SUPERSEDED, reference=f'[Superseded at Ep{n}, T4 by "New"]'),
        9,
        "reference episode",
        True,
    ),
    "reference turn": (
        lambda n: memories_md(header=SUPERSEDED, reference=f'[Invalidated at T{n}: "wrong"]'),
        9,
        "reference turn",
        True,
    ),
}


@pytest.mark.parametrize("case", OUT_OF_RANGE, ids=list(OUT_OF_RANGE))
def test_a_number_outside_sqlites_range_is_a_problem_at_its_line(case: str) -> None:
    make, line, names, location_kept = OUT_OF_RANGE[case]

    result = both_readers(make(TOO_BIG))

    assert len(result.problems) == 1, result.problems
    problem = result.problems[0]
    assert problem.line == line
    assert names in problem.message and "out of range" in problem.message
    assert "skipped" in problem.message
    if location_kept:  # the memory is skipped, its location kept
        assert [entry.location.id for entry in result.locations] == [5]
        assert result.locations[0].memories == ()
    else:
        assert result.locations == ()
    # the largest integer SQLite stores (the smallest, for the lost score) is read; an
    # episode's largest is one below (models.MAX_EPISODE: the next must still be numbered)
    largest = MAX_EPISODE if "episode" in names else BIGGEST
    if largest != BIGGEST:
        assert [p.line for p in both_readers(make(BIGGEST)).problems] == [line]
    text = make(largest)
    fits = both_readers(text)
    assert fits.problems == ()
    assert str(SMALLEST if case == "score lost" else largest) in render_memories_md(fits.locations)
    if "older" not in case:
        assert read_canonical(text) is not None  # the fast reader takes it too


@pytest.mark.parametrize("episodes", ["0, -1", "0", "2, -3", "1, 0"])
def test_an_episode_below_1_in_the_episode_list_is_a_problem_at_its_line(episodes: str) -> None:
    text = memories_md(episodes=episodes)

    result = both_readers(text)

    assert len(result.problems) == 1, result.problems
    assert result.problems[0].line == 4
    assert "below 1" in result.problems[0].message
    assert "location 5 skipped" in result.problems[0].message
    assert result.locations == ()


LONG = "x" * 1000

LONG_QUOTES = {
    "unknown category": memories_md(header=f"**[{LONG}] {LONG}** *(Ep1, T3)*"),
    "unknown marker": memories_md(header=f"**[NOTE - {LONG}] {LONG}** *(Ep1, T3)*"),
    "ephemeral": memories_md(header=f"**[NOTE - EPHEMERAL] {LONG}** *(Ep1, T3)*"),
    "malformed metadata": memories_md(header=f"**[NOTE] {LONG}** *(Ep1, {LONG})*"),
    "title too long": memories_md(header=f"**[NOTE - PERMANENT] {LONG}** *(Ep1, T3)*"),
    "number out of range": memories_md(header=f"**[NOTE] {LONG}** *(Ep{'9' * 100}, T3)*"),
    "turn range backwards": memories_md(header=f"**[NOTE] T** *(Ep1, T{'9' * 18}-{'0' * 99}1)*"),
    "reference on an active memory": memories_md(
        header=f"**[NOTE - PERMANENT] {'y' * 400}** *(Ep1, T3)*", reference="[Superseded at T4]"
    ),
    "superseded with a reason": memories_md(
        header=f"**[NOTE - PERMANENT - SUPERSEDED] {'y' * 400}** *(Ep1, T3)*",
        reference=f'[Superseded at T4: "{LONG}"]',
    ),
    "malformed reference": memories_md(
        header=f"**[NOTE - PERMANENT - SUPERSEDED] {'y' * 400}** *(Ep1, T3)*",
        reference=f"[Superseded at {LONG}]",
    ),
    "location id out of range": memories_md(location="9" * 100),
    "malformed episode list": memories_md(episodes=LONG),
    "malformed location header": memories_md(location=LONG),
}


@pytest.mark.parametrize("case", LONG_QUOTES, ids=list(LONG_QUOTES))
def test_a_problem_quotes_at_most_80_characters_of_a_field(case: str) -> None:
    result = both_readers(LONG_QUOTES[case])

    assert result.problems, "the file has a problem to report"
    for problem in result.problems:
        for piece in ("x" * 81, "y" * 81, "9" * 81, "0" * 81):
            assert piece not in problem.message, problem
        assert "…" in problem.message, problem
        assert len(problem.message) < 400, problem


@pytest.mark.parametrize(
    ("reference", "episode"),
    [
        ("[Superseded]", None),
        ("[Invalidated]", None),
        ("[Superseded]  ", None),
        ("[Superseded at Ep1]", None),  # the memory's own episode: written as no line
        ("[Superseded at Ep4]", 4),
        ("[Superseded at T7]", 1),
        ('[Superseded by "New"]', 1),
    ],
)
def test_a_bare_superseded_reference_line_reads_back_the_same_after_an_export(
    reference: str, episode: int | None
) -> None:
    text = memories_md(header=SUPERSEDED, reference=reference)

    first = both_readers(text)
    again = both_readers(render_memories_md(first.locations))

    assert first.problems == () and again.problems == ()
    assert again.locations == first.locations
    assert render_memories_md(again.locations) == render_memories_md(first.locations)
    (memory,) = first.locations[0].memories
    assert memory.status is Status.SUPERSEDED
    assert memory.superseded_at_episode == episode


# --- the command line ---------------------------------------------------------------------------


def one_error_line(err: str) -> bool:
    lines = err.strip().splitlines()
    return len(lines) == 1 and lines[0].startswith("memstore: error: ")


@pytest.fixture
def db(db_path: Path, mem: MakeMemory) -> Path:
    with MemoryStore.open(db_path) as store:
        store.record_visit(15, "West of House", 1)
        store.add_memory(15, "West of House", mem("Mailbox", turns="2"))
    return db_path


def test_import_of_out_of_range_numbers_reports_their_lines_and_apply_writes_nothing(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    before = tmp_path / "before.md"
    assert run(capsys, "--db", str(db), "export", "--out", str(before))[0] == 0
    exported = before.read_text(encoding="utf-8")
    edited = tmp_path / "edited.md"
    far = header(f"Ep1, T{TOO_BIG}").replace("Lamp", "Far")
    sections = [memories_md(location=TOO_BIG), memories_md(location=16, header=far)]
    # the two locations after the exported ones, without their files' title lines
    edited.write_text(exported + "".join(s.split("\n", 2)[2] for s in sections), encoding="utf-8")
    lines = edited.read_text(encoding="utf-8").split("\n")
    id_line = 1 + next(i for i, line in enumerate(lines) if f"Location {TOO_BIG}:" in line)
    turn_line = 1 + next(i for i, line in enumerate(lines) if f"T{TOO_BIG}" in line)

    code, out, err = run(capsys, "--db", str(db), "import", str(edited))
    assert f"line {id_line}: location id {TOO_BIG} is out of range" in out
    assert f"line {turn_line}: turn {TOO_BIG} is out of range" in out
    assert code == 0 or one_error_line(err)

    code, out, err = run(capsys, "--db", str(db), "import", str(edited), "--apply")
    assert code == 1 and one_error_line(err)
    assert "2 problem(s)" in err and "nothing was applied" in err
    after = tmp_path / "after.md"
    assert run(capsys, "--db", str(db), "export", "--out", str(after))[0] == 0
    assert after.read_text(encoding="utf-8") == exported

    # the valid parts still apply, without the numbers that do not fit
    code, out, err = run(
        capsys, "--db", str(db), "import", str(edited), "--apply", "--skip-invalid"
    )
    assert code == 0 and "applied" in out, err
    assert run(capsys, "--db", str(db), "export", "--out", str(after))[0] == 0
    text = after.read_text(encoding="utf-8")
    assert "## Location 16: Room" in text and str(TOO_BIG) not in text
