"""The demo's map against the real game: Map.md reproduced byte for byte from a fresh
database, rendered the same every time, and map_state.json round-tripping (slow: it plays
Zork I)."""

from __future__ import annotations

from pathlib import Path

import pytest

import memstore.cli as cli
from memstore.demo import DEFAULT_EPISODES, DEFAULT_MOVES, run_demo
from memstore.map_json import dump_map_state, import_map_state, parse_map_state
from memstore.map_store import MapStore
from memstore.store import MemoryStore
from tests.fixtures.walkthrough import rom_or_skip

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The README's demo on a fresh database: its folder holds demo.db, Memories.md, Map.md."""
    rom_or_skip()
    folder = tmp_path_factory.mktemp("demo")
    with MemoryStore.open(folder / "demo.db") as store:
        report = run_demo(
            store,
            episodes=DEFAULT_EPISODES,
            moves=DEFAULT_MOVES,
            out=folder / "Memories.md",
            progress=False,
        )
    assert report.mode == "offline"
    assert report.map_exported_to == folder / "Map.md"
    assert f"exported the map to {folder / 'Map.md'}" in report.render()
    return folder


def test_the_demo_reproduces_the_committed_map_md(demo: Path) -> None:
    made = (demo / "Map.md").read_bytes()
    assert made == (ROOT / "game_files" / "Map.md").read_bytes()


def test_map_md_renders_the_same_for_the_same_database(
    demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "Map.md"
    for _ in range(2):
        assert cli.main(["--db", str(demo / "demo.db"), "map", "export", "--out", str(out)]) == 0
        assert out.read_bytes() == (demo / "Map.md").read_bytes()
    check = ["--db", str(demo / "demo.db"), "map", "export", "--check", "--out"]
    assert cli.main([*check, str(ROOT / "game_files" / "Map.md")]) == 0
    capsys.readouterr()


def test_the_demo_map_round_trips_through_map_state_json(demo: Path, tmp_path: Path) -> None:
    with MemoryStore.open(demo / "demo.db", read_only=True) as store:
        graph = MapStore(store).graph()
    assert len(graph.rooms) > 20 and len(graph.connections) > 30
    exported = dump_map_state(graph)
    with MemoryStore.open(tmp_path / "copy.db") as copy:
        parsed = parse_map_state(exported)
        assert parsed.notes == ()
        import_map_state(MapStore(copy), parsed)
        assert MapStore(copy).graph() == graph
        assert dump_map_state(MapStore(copy).graph()) == exported


def test_the_demo_map_has_nothing_random(demo: Path) -> None:
    text = (demo / "Map.md").read_text(encoding="utf-8")
    assert "database=" not in text and "memories.db" not in text and "demo.db" not in text
    assert text.startswith("# Map\n\n") and "```mermaid\ngraph TD\n" in text
