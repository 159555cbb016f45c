"""Review B, findings 6-9: the synthesis prompt's bound (B6), a NUL in a string setting
(B7), booleans given as numbers and the in-memory database on the command line (B9), and a
damaged schema on the command line (B8)."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from memstore.config import load_config
from memstore.connection import resolve_target
from memstore.errors import NotAMemstoreDatabase, UnsupportedDatabase
from memstore.manager import SimpleMemoryManager
from memstore.models import TEXT_MAX, TITLE_MAX, Memory
from memstore.prompt import (
    MAX_HISTORY_TURNS,
    MAX_PROMPT_CHARS,
    MAX_RESPONSE_CHARS,
    build_synthesis_messages,
    listed_handles,
    listed_memories,
)
from memstore.schema import HEAD_REVISION
from memstore.store import MemoryStore
from memstore.synthesis import number_memories, parse_synthesis_answer, resolve_decision
from memstore.triggers import ZMachineContext
from tests.cli_helpers import one_error_line, run
from tests.conftest import note
from tests.pg_attack_helpers import cluster as cluster  # a fixture
from tests.pg_attack_helpers import pg_url as pg_url  # a fixture

ROOM = 5
MEGABYTE = 1_000_000
HANDLE_LINE = re.compile(r"^\[(\d+)\] \[", re.MULTILINE)


def big_note(index: int, **fields: Any) -> Memory:
    values: dict[str, Any] = {
        "category": "NOTE",
        "title": f"note {index}",
        "text": "w" * 20_000,
        "episode": 1,
        "turns": "1",
        "persistence": "permanent",
    }
    values.update(fields)
    return Memory(**values)


def size(messages: list[dict[str, str]]) -> int:
    return sum(len(message["content"]) for message in messages)


def listed_in(text: str) -> list[int]:
    return [int(handle) for handle in HANDLE_LINE.findall(text)]


# --------------------------------------------------------------------------- B6


def test_b6_reviewers_case_stays_within_the_bound_and_lists_what_fits() -> None:
    """100 memories of 20,000 characters, a 1 MB response and reasoning: 4-6 MB before."""
    existing = number_memories([big_note(i) for i in range(100)])
    messages = build_synthesis_messages(
        location_id=ROOM,
        location_name="Room",
        action="look",
        response="z" * MEGABYTE,
        ctx=ZMachineContext(location_before=ROOM, location_after=ROOM, score_after=1),
        existing=existing,
        recent_actions=[(1, "look", "z" * MEGABYTE)],
        recent_reasoning=[(1, "r" * MEGABYTE, "look")],
        turn=2,
        episode=1,
    )
    assert size(messages) <= MAX_PROMPT_CHARS
    text = messages[1]["content"]
    shown = listed_in(text)
    # as many as fit: each shows its title and the start of its text
    assert len(shown) >= 15
    assert set(shown) == listed_handles(existing, 1)
    assert all(f"] note {handle - 1} (" in text for handle in shown)
    assert f"({100 - len(shown)} more memories not shown)" in text
    assert "z" * (MAX_RESPONSE_CHARS - 1) + "…" in text
    assert "z" * MAX_RESPONSE_CHARS not in text
    assert "r" * 600 not in text and "r" * 599 + "…" in text


def test_b6_every_field_at_its_worst_stays_within_the_bound() -> None:
    huge = "x" * MEGABYTE
    memories = [
        big_note(
            i,
            category="DANGER",
            title=f"t{i}".ljust(TITLE_MAX, "y"),
            text="w" * TEXT_MAX,
            episode=2**62,
            turns="9223372036854775806-9223372036854775807",
            status="SUPERSEDED" if i % 2 else "ACTIVE",
        )
        for i in range(300)
    ]
    ctx = ZMachineContext(
        location_before=1,
        location_after=2**62,
        score_before=-(2**62),
        score_after=2**62,
        inventory_before=frozenset(range(1, 1001)),
        inventory_after=frozenset(range(1001, 2001)),
        item_names={item: huge for item in range(1, 2001)},
        location_after_name=huge,
        died=True,
    )
    history = [(10**15 + turn, huge, huge) for turn in range(3 * MAX_HISTORY_TURNS)]
    messages = build_synthesis_messages(
        location_id=2**62,
        location_name=huge,
        action=huge,
        response=huge,
        ctx=ctx,
        existing=number_memories(memories),
        recent_actions=history,
        recent_reasoning=history,
        first_visit=True,
        turn=2**62,
        episode=5,
    )
    assert size(messages) <= MAX_PROMPT_CHARS
    text = messages[1]["content"]
    assert len(listed_in(text)) >= 1  # as many as fit: no count bounds them (review E #3)
    assert "earlier turns not shown)" in text
    assert "and 980 more" in text  # items gained beyond those listed


def test_b6_the_most_useful_memories_are_listed_first_in_handle_order() -> None:
    """A DANGER memory, the TENTATIVE one (what synthesis settles: review E #3 lists it
    second, no longer last) and the newest notes are listed; the oldest notes are left
    out when not everything fits."""
    memories = [big_note(0, category="DANGER", title="Troll kills")]
    memories += [big_note(i) for i in range(1, 60)]
    memories.append(big_note(60, title="maybe", status="TENTATIVE"))
    existing = number_memories(memories)
    listed, left_out = listed_memories(existing)
    handles = [handle for handle, _ in listed]
    assert handles[0] == 1 and handles[-1] == 61 and handles == sorted(handles)
    assert 2 not in handles
    assert handles[1:-1] == list(range(61 - len(handles) + 2, 61))
    assert left_out == 61 - len(handles)
    text = build_synthesis_messages(
        location_id=ROOM,
        location_name="Room",
        action="look",
        response="ok",
        ctx=ZMachineContext(location_before=ROOM, location_after=ROOM),
        existing=existing,
    )[1]["content"]
    assert listed_in(text) == handles


def test_b6_small_prompts_are_unchanged_and_list_everything() -> None:
    memories = [big_note(i, text="short") for i in range(3)]
    existing = number_memories(memories)
    assert listed_memories(existing) == (list(existing), 0)
    text = build_synthesis_messages(
        location_id=ROOM,
        location_name="Room",
        action="look",
        response="ok",
        ctx=ZMachineContext(location_before=ROOM, location_after=ROOM),
        existing=existing,
    )[1]["content"]
    assert listed_in(text) == [1, 2, 3] and "not shown" not in text and "…" not in text


def test_b6_a_memory_left_out_cannot_be_referenced() -> None:
    existing = number_memories([big_note(i) for i in range(100)])
    listed = listed_handles(existing)
    hidden = next(handle for handle in range(1, 101) if handle not in listed)
    visible = max(listed)
    answer = parse_synthesis_answer(
        json.dumps(
            {
                "should_remember": False,
                "invalidates": [hidden, f"note {hidden - 1}", visible],
                "invalidation_reason": "wrong",
                "reasoning": "t",
            }
        )
    )
    decision = resolve_decision(answer, existing, False, listed)
    assert decision.invalidate_titles == (f"note {visible - 1}",)
    # ignored as not shown (review E #3), not counted as hallucinated: they exist
    assert decision.unshown_references == (hidden, f"note {hidden - 1}")
    assert decision.hallucinated_references == ()
    # without ``listed`` every memory may be named, as before (the hidden one twice)
    everything = resolve_decision(answer, existing, False).invalidate_titles
    assert everything == (f"note {hidden - 1}", f"note {visible - 1}")


def test_b6_through_the_manager_the_model_sees_a_bounded_prompt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = MemoryStore.open(tmp_path / "b6.db")
    try:
        for i in range(100):
            store.add_memory(ROOM, "Room", big_note(i))
        seen: list[list[dict[str, str]]] = []

        def llm(messages: list[dict[str, str]]) -> str:
            seen.append(messages)
            listed = listed_in(messages[1]["content"])
            hidden = next(handle for handle in range(1, 101) if handle not in listed)
            return json.dumps(
                {
                    "should_remember": False,
                    "invalidates": [hidden, listed[-1]],
                    "invalidation_reason": "wrong",
                    "reasoning": "t",
                }
            )

        manager = SimpleMemoryManager(store, llm=llm, episode=1)
        manager.add_reasoning(1, "r" * MEGABYTE, "look")
        context = ZMachineContext(
            location_before=ROOM, location_after=ROOM, score_before=0, score_after=1
        )
        manager.record_action_outcome(ROOM, "Room", "look", "z" * MEGABYTE, context)
        manager.flush()
        assert len(seen) == 1 and size(seen[0]) <= MAX_PROMPT_CHARS
        # the hidden one exists: ignored as "not shown" (review E #3), not hallucinated
        assert manager.counters["hallucinated_references"] == 0
        assert "not shown in the prompt" in caplog.text and "do not exist" not in caplog.text
        assert len(store.memories(ROOM)) == 99  # only the listed one was invalidated
    finally:
        store.close()


# --------------------------------------------------------------------------- B7, B9


@pytest.fixture
def project(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A folder of its own, whose pyproject.toml (written by the test) is the nearest."""
    monkeypatch.chdir(tmp_path)
    pyproject = tmp_path / "pyproject.toml"
    monkeypatch.setattr("memstore.config.find_pyproject", lambda start=None: pyproject)
    return pyproject


def settings(project: Path, line: str) -> None:
    project.write_text(f"[tool.memstore]\n{line}\n", encoding="utf-8")


@pytest.mark.parametrize(
    "line",
    [
        'db = "x.db\\u0000y"',
        'db = "sqlite:///x\\u0000.db"',
        'model = "gpt\\u0000"',
        'api_base = "http://h\\u0000"',
        'api_key = "k\\u0000"',
        'query_model = "q\\u0000"',
    ],
)
def test_b7_a_nul_in_a_text_setting_is_one_config_error_naming_it(
    project: Path, capsys: pytest.CaptureFixture[str], line: str
) -> None:
    settings(project, line)
    name = line.split(" ")[0]
    with pytest.raises(ValidationError, match=f"{name} holds a NUL character"):
        load_config()
    code, _out, err = run(capsys, "stats")
    assert code == 1
    one_error_line(err, "invalid memstore settings", f"{name}: ", "NUL character")
    assert "internal error" not in err


def test_b7_a_nul_in_a_path_given_in_code_is_one_line_too() -> None:
    for given in ("x\x00.db", Path("x\x00.db"), "sqlite:///x\x00.db"):
        with pytest.raises(UnsupportedDatabase, match="cannot hold a NUL character"):
            resolve_target(given)
    with pytest.raises(UnsupportedDatabase, match="cannot hold a NUL character"):
        MemoryStore.open("x\x00.db")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("timeout = true", "timeout must be a number, not true"),
        ("history_window = true", "history_window must be a number, not true"),
        ("temperature = false", "temperature must be a number, not false"),
        ("max_tokens = true", "max_tokens must be a number, not true"),
        ("num_retries = false", "num_retries must be a number, not false"),
        ("token_budget = true", "token_budget must be a number, not true"),
        ("map_prune_after = true", "map_prune_after must be a number, not true"),
        ("map_route_confidence = false", "map_route_confidence must be a number, not false"),
        ("map_exits_line = 1", "map_exits_line must be true or false, not 1"),
        ('show_persistence_markers = "yes"', "show_persistence_markers must be true or false"),
    ],
)
def test_b9_a_bool_is_no_number_and_a_number_no_flag(
    project: Path, capsys: pytest.CaptureFixture[str], line: str, message: str
) -> None:
    settings(project, line)
    with pytest.raises(ValidationError, match=message):
        load_config()
    code, _out, err = run(capsys, "stats")
    assert code == 1
    one_error_line(err, "invalid memstore settings", message)


def test_b9_numbers_and_flags_given_properly_still_load(project: Path) -> None:
    settings(project, "timeout = 12\nhistory_window = 4\ntemperature = 1\nmap_exits_line = false")
    config = load_config()
    assert (config.timeout, config.history_window, config.temperature) == (12.0, 4, 1.0)
    assert config.map_exits_line is False


@pytest.mark.parametrize("db", ["sqlite:///", "sqlite:///:memory:", "sqlite://"])
@pytest.mark.parametrize("command", [["stats"], ["show", "64"], ["export", "--out", "-"]])
def test_b9_a_read_only_command_on_the_in_memory_database_says_it_holds_nothing(
    project: Path, capsys: pytest.CaptureFixture[str], db: str, command: list[str]
) -> None:
    settings(project, f'db = "{db}"')
    code, _out, err = run(capsys, *command)
    assert code == 1
    line = one_error_line(err, "is an in-memory database", "holds nothing to read")
    assert "read-only" not in line and "nothing was written" not in line
    code, _out, err = run(capsys, "--db", db, *command)
    assert code == 1 and "holds nothing to read" in err


# --------------------------------------------------------------------------- B8


def damaged(db_path: Path, statement: str) -> Path:
    with MemoryStore.open(db_path) as store:
        store.add_memory(64, "West of House", note("Mailbox here"))
    connection = sqlite3.connect(db_path)
    connection.executescript(statement)
    connection.commit()
    connection.close()
    return db_path


DAMAGES = {
    "renamed column": (
        "ALTER TABLE memories RENAME COLUMN title TO ttl;",
        "has no memories.title",
    ),
    "dropped table": ("DROP TABLE memory_history;", "has no memory_history"),
    "empty alembic_version": (
        "DELETE FROM alembic_version;",
        "its alembic_version table holds no revision",
    ),
    "two revisions": (
        "INSERT INTO alembic_version VALUES ('0009');",
        f"holds more than one revision ('{HEAD_REVISION}', '0009')",
    ),
    "a revision that is no name": (
        f"UPDATE alembic_version SET version_num = x'{HEAD_REVISION.encode().hex()}';",
        f"holds a revision that is no name ({HEAD_REVISION.encode()!r})",
    ),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
@pytest.mark.parametrize("command", [["stats"], ["show", "64"], ["check"], ["db", "upgrade"]])
def test_b8_a_damaged_schema_is_one_plain_line_without_upgrade_advice(
    db_path: Path, capsys: pytest.CaptureFixture[str], damage: str, command: list[str]
) -> None:
    statement, reason = DAMAGES[damage]
    damaged(db_path, statement)
    before = db_path.read_bytes()
    code, _out, err = run(capsys, "--db", str(db_path), *command)
    assert code == 1
    line = one_error_line(err, "is damaged, not a sound memstore database", reason)
    assert "upgrade" not in line and "newer" not in line and "internal error" not in line
    assert db_path.read_bytes() == before  # left untouched
    with pytest.raises(NotAMemstoreDatabase, match="is damaged"):
        MemoryStore.open(db_path)
    assert db_path.read_bytes() == before


#: the damages a PostgreSQL database can have (its version column takes no bytes)
PG_DAMAGES = [name for name in DAMAGES if name != "a revision that is no name"]


@pytest.mark.parametrize("damage", PG_DAMAGES)
def test_b8_a_damaged_postgresql_schema_is_the_same_one_line(
    pg_url: str, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    # was: PostgreSQL read no columns and one revision of a doubled alembic_version
    from sqlalchemy import create_engine

    statement, reason = DAMAGES[damage]
    with MemoryStore.open(pg_url) as store:
        store.add_memory(64, "West of House", note("Mailbox here"))
    engine = create_engine(pg_url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(statement.rstrip(";"))
    finally:
        engine.dispose()
    with pytest.raises(NotAMemstoreDatabase, match="is damaged") as refused:
        MemoryStore.open(pg_url)
    assert reason in str(refused.value) and "\n" not in str(refused.value)
    for command in (["stats"], ["db", "current"]):  # (db current gave the revision)
        code, _out, err = run(capsys, "--db", pg_url, *command)
        assert code == 1, command
        line = one_error_line(err, "is damaged, not a sound memstore database", reason)
        assert "upgrade" not in line and "internal error" not in line


def test_b8_a_sound_database_still_opens_and_a_true_bug_is_still_one(
    db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    damaged(db_path, "SELECT 1;")  # nothing altered
    code, out, _err = run(capsys, "--db", str(db_path), "show", "64")
    assert code == 0 and "Mailbox here" in out
    # an extra column someone added is no damage
    damaged(db_path, "ALTER TABLE memories ADD COLUMN mine TEXT;")
    code, out, _err = run(capsys, "--db", str(db_path), "show", "64")
    assert code == 0 and "Mailbox here" in out
