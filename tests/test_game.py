"""The story-file locator and the Zork I adapter over Jericho."""

from __future__ import annotations

import hashlib
import http.server
import threading
import warnings
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from memstore import rom as rom_mod
from memstore.game import (
    GameError,
    GameSnapshot,
    ZorkGame,
    clean_response,
    is_death,
    is_win,
    z_machine_context,
)
from memstore.rom import (
    ROM_ENV_VAR,
    UPSTREAM_URL,
    ZORK1_SHA256,
    RomError,
    fetch_rom,
    find_rom,
    verify_rom,
)
from memstore.triggers import Trigger, significance

# spec 003 imports ``tests.fixtures.walkthrough``; without a tests/__init__.py pytest
# puts tests/ itself on sys.path, where the same module is ``fixtures.walkthrough``.
try:
    from tests.fixtures.walkthrough import (
        GRUE_DEATH_SEQUENCE,
        LAMP_OBJECT,
        get_walkthrough_until_lamp,
        new_game,
        replay_walkthrough,
        rom_or_skip,
    )
except ModuleNotFoundError:  # pragma: no cover - depends on how pytest was started
    from fixtures.walkthrough import (  # type: ignore[no-redef]
        GRUE_DEATH_SEQUENCE,
        LAMP_OBJECT,
        get_walkthrough_until_lamp,
        new_game,
        replay_walkthrough,
        rom_or_skip,
    )

WEST_OF_HOUSE = 64
PLAYER = 44


@pytest.fixture
def game() -> Iterator[ZorkGame]:
    g = new_game()
    yield g
    g.close()


@pytest.fixture
def rom_bytes() -> bytes:
    return rom_or_skip().read_bytes()


@pytest.fixture
def no_rom_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No MEMSTORE_ROM, an empty working directory and an empty repository root."""
    monkeypatch.delenv(ROM_ENV_VAR, raising=False)
    cwd = tmp_path / "cwd"
    root = tmp_path / "root"
    cwd.mkdir()
    root.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(rom_mod, "REPO_ROOT", root)
    return tmp_path


def _put(path: Path, data: bytes = b"story") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


# --------------------------------------------------------------------------- find_rom


def test_find_rom_prefers_explicit_path_over_env_and_defaults(no_rom_env, monkeypatch):
    explicit = _put(no_rom_env / "explicit.z3")
    monkeypatch.setenv(ROM_ENV_VAR, str(_put(no_rom_env / "env.z3")))
    _put(no_rom_env / "cwd" / "roms" / "zork1.z3")
    assert find_rom(explicit, verify=False) == explicit


def test_find_rom_uses_env_var_before_working_directory(no_rom_env, monkeypatch):
    env_file = _put(no_rom_env / "env.z3")
    monkeypatch.setenv(ROM_ENV_VAR, str(env_file))
    _put(no_rom_env / "cwd" / "roms" / "zork1.z3")
    assert find_rom(verify=False) == env_file


def test_find_rom_uses_working_directory_before_repository_root(no_rom_env):
    cwd_file = _put(no_rom_env / "cwd" / "roms" / "zork1.z3")
    _put(no_rom_env / "root" / "roms" / "zork1.z3")
    assert find_rom(verify=False).resolve() == cwd_file.resolve()


def test_find_rom_falls_back_to_repository_root(no_rom_env):
    root_file = _put(no_rom_env / "root" / "roms" / "zork1.z3")
    assert find_rom(verify=False) == root_file


def test_find_rom_missing_everywhere_says_how_to_get_it(no_rom_env):
    with pytest.raises(RomError) as info:
        find_rom()
    message = str(info.value)
    assert ROM_ENV_VAR in message
    assert "memstore rom fetch" in message
    assert UPSTREAM_URL in message
    assert ZORK1_SHA256 in message


def test_find_rom_explicit_missing_path_is_an_error_not_a_fallback(no_rom_env):
    _put(no_rom_env / "cwd" / "roms" / "zork1.z3")
    missing = no_rom_env / "nope.z3"
    with pytest.raises(RomError, match="nope.z3"):
        find_rom(missing, verify=False)


def test_find_rom_env_var_naming_missing_file_is_an_error(no_rom_env, monkeypatch):
    _put(no_rom_env / "cwd" / "roms" / "zork1.z3")
    monkeypatch.setenv(ROM_ENV_VAR, str(no_rom_env / "gone.z3"))
    with pytest.raises(RomError, match=r"\$MEMSTORE_ROM .*gone\.z3"):
        find_rom(verify=False)


def test_find_rom_verifies_checksum_by_default(no_rom_env):
    _put(no_rom_env / "cwd" / "roms" / "zork1.z3", b"not zork")
    with pytest.raises(RomError, match="not Zork I release 119"):
        find_rom()


def test_find_rom_accepts_the_real_story_file(rom_bytes, no_rom_env):
    real = _put(no_rom_env / "root" / "roms" / "zork1.z3", rom_bytes)
    assert find_rom() == real


# --------------------------------------------------------------------------- verify_rom


def test_verify_rom_rejects_wrong_file_naming_both_checksums(tmp_path):
    wrong = _put(tmp_path / "zork1.z3", b"\x03" + b"\x00" * 100)
    with pytest.raises(RomError) as info:
        verify_rom(wrong)
    assert hashlib.sha256(wrong.read_bytes()).hexdigest() in str(info.value)
    assert ZORK1_SHA256 in str(info.value)


def test_verify_rom_rejects_missing_file_with_instructions(tmp_path):
    with pytest.raises(RomError, match="memstore rom fetch"):
        verify_rom(tmp_path / "absent.z3")


def test_verify_rom_accepts_release_119(tmp_path, rom_bytes):
    real = _put(tmp_path / "zork1.z3", rom_bytes)
    assert verify_rom(real) == real


# --------------------------------------------------------------------------- fetch_rom


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        pass


@pytest.fixture
def http_dir(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A local HTTP server on 127.0.0.1 serving a directory: (directory, base URL)."""
    served = tmp_path / "served"
    served.mkdir()
    handler = partial(_QuietHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield served, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_fetch_rom_downloads_and_writes_the_verified_file(http_dir, tmp_path, rom_bytes):
    served, base = http_dir
    _put(served / "zork1.z3", rom_bytes)
    dest = tmp_path / "out" / "roms" / "zork1.z3"
    assert fetch_rom(dest, f"{base}/zork1.z3", timeout=10) == dest
    assert dest.read_bytes() == rom_bytes
    assert verify_rom(dest) == dest
    assert [p.name for p in dest.parent.iterdir()] == ["zork1.z3"]  # no temp file left


def test_fetch_rom_wrong_bytes_raise_and_leave_no_file(http_dir, tmp_path):
    served, base = http_dir
    _put(served / "zork1.z3", b"definitely not a story file")
    dest = tmp_path / "out" / "zork1.z3"
    with pytest.raises(RomError, match="not Zork I release 119"):
        fetch_rom(dest, f"{base}/zork1.z3", timeout=10)
    assert not dest.exists()
    assert not dest.parent.exists() or not any(dest.parent.iterdir())  # no temp file left


def test_fetch_rom_wrong_bytes_keep_an_existing_good_file(http_dir, tmp_path, rom_bytes):
    served, base = http_dir
    _put(served / "zork1.z3", b"tampered")
    dest = _put(tmp_path / "zork1.z3", rom_bytes)
    with pytest.raises(RomError):
        fetch_rom(dest, f"{base}/zork1.z3", timeout=10)
    assert dest.read_bytes() == rom_bytes


def test_fetch_rom_http_error_raises_rom_error_and_writes_nothing(http_dir, tmp_path):
    _served, base = http_dir
    dest = tmp_path / "zork1.z3"
    with pytest.raises(RomError, match="Could not download"):
        fetch_rom(dest, f"{base}/missing.z3", timeout=10)
    assert not dest.exists()


# --------------------------------------------------------------------------- the game


def test_release_119_uses_the_zmachine_reader_without_warnings():
    path = rom_or_skip()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g = ZorkGame(path)
        g.reset()
    assert g.reader_kind == "zmachine"
    assert g.fully_supported is False
    g.close()


def test_game_starts_west_of_house_with_nothing(game):
    _, start = game.reset()
    assert start == GameSnapshot(WEST_OF_HOUSE, "West of House", 0, 0, ())
    assert game.snapshot() == start


def test_reset_returns_the_opening_text(game):
    text, _ = game.reset()
    assert "Release 119 / Serial number 880429" in text
    assert "West of House" in text


def test_player_is_the_cretin_inside_west_of_house(game):
    assert game.player_id == PLAYER
    assert game.object_name(PLAYER) == "cretin"
    assert game.reader.parent(PLAYER) == WEST_OF_HOUSE


def test_zmachine_header_addresses_of_release_119(game):
    assert game.reader.globals_addr == 0x02B0
    assert game.reader.objects_addr == 0x03E6
    assert game.reader.object_count == 250


def test_object_names_decode_including_abbreviations(game):
    names = {n: game.object_name(n) for n in (64, 146, 75, 208, 41, 214)}
    assert names == {
        64: "West of House",
        146: "brass lantern",
        75: "Living Room",
        208: "magic boat",
        41: "ZORK owner's manual",
        214: "sapphire-encrusted bracelet",
    }
    assert game.object_name(0) == "" and game.object_name(999) == ""


def test_object_names_are_decoded_once_and_cached(game):
    first = game.object_name(146)
    assert game.object_name(146) is first
    assert game.reader._names[146] is first


def test_step_reports_movement_and_strips_the_status_line(game):
    result = game.step("N")
    assert result.before.location_id == WEST_OF_HOUSE
    assert result.after.location_name == "North of House"
    assert result.moved
    assert result.after.moves == 1
    assert result.response.startswith("North of House")
    assert "Score:" in result.raw_response and "Score:" not in result.response


def test_inventory_lists_object_numbers_and_names(game):
    results = replay_walkthrough(game, get_walkthrough_until_lamp())
    assert (LAMP_OBJECT, "brass lantern") in results[-1].after.inventory
    assert game.snapshot().inventory_ids == {LAMP_OBJECT, 105, 217}


def test_walking_into_the_dark_without_light_gets_eaten_by_a_grue(game):
    results = replay_walkthrough(game, GRUE_DEATH_SEQUENCE)
    assert [r.after.died for r in results] == [False] * 8 + [True]
    assert "grue" in results[-1].response
    assert results[-2].after.location_name == "Cellar"
    ctx = results[-1].context()
    assert ctx.died and Trigger.DEATH in significance(ctx)


def test_death_and_win_detection_from_text():
    assert is_death("\n    ****  You have died  ****\n\n")
    assert not is_death("You have died of boredom? No.")
    assert is_win("... You have mastered the first part\nof the ZORK trilogy. Those who ...")
    assert not is_win("You have mastered nothing.")
    assert clean_response("> Kitchen     Score: 5     Moves: 9   \nTaken.\n") == "Taken.\n"


def test_context_of_taking_the_lamp_names_the_gained_item(game):
    results = replay_walkthrough(game, get_walkthrough_until_lamp())
    ctx = z_machine_context(results[-1].before, results[-1].after, results[-1].response)
    assert ctx.items_gained == {LAMP_OBJECT}
    assert ctx.items_lost == frozenset()
    assert ctx.item_names == {LAMP_OBJECT: "brass lantern"}
    assert not ctx.location_changed
    assert significance(ctx) == [Trigger.INVENTORY_CHANGED]


def test_context_of_scoring_move_has_score_and_location_deltas(game):
    # the first entry into the Kitchen is worth 10 points
    results = replay_walkthrough(game, ["N", "E", "Open window", "W"])
    ctx = results[-1].context(first_visit=True)
    assert ctx.score_delta == 10
    assert (ctx.location_before, ctx.location_after) == (85, 27)
    assert ctx.location_after_name == "Kitchen"
    assert ctx.response_length == len(results[-1].response)
    assert significance(ctx)[:2] == [Trigger.SCORE_CHANGED, Trigger.LOCATION_CHANGED]
    assert Trigger.FIRST_VISIT in significance(ctx)


def test_context_of_dropping_names_the_lost_item(game):
    replay_walkthrough(game, ["N", "N", "U", "Get egg"])
    result = game.step("Drop egg")
    ctx = result.context()
    assert ctx.items_lost == {105}
    assert ctx.item_names == {105: "jewel-encrusted egg"}


def test_unknown_reader_kind_is_rejected():
    with pytest.raises(ValueError, match="reader must be"):
        ZorkGame(rom_or_skip(), reader="psychic")


def test_closed_game_refuses_to_step():
    g = new_game()
    g.close()
    g.close()  # closing twice is harmless
    with pytest.raises(GameError, match="closed"):
        g.step("N")
    with pytest.raises(GameError, match="closed"):
        g.snapshot()


# A broken story file given by path must raise before Frotz sees it: Frotz ends the whole
# process on one ("Fatal error: Story file read error"), which no caller could catch.


def test_an_explicit_story_path_that_is_missing_says_how_to_get_one(tmp_path):
    with pytest.raises(RomError, match=r"No story file at .*absent\.z3.*memstore rom fetch"):
        ZorkGame(tmp_path / "absent.z3")


def test_an_explicit_path_to_a_file_that_is_no_story_file_is_refused(tmp_path):
    text = _put(tmp_path / "notes.z3", b"# these are my notes, not a game\n" * 4)
    with pytest.raises(RomError, match="not a Z-machine story file"):
        ZorkGame(text)
    with pytest.raises(RomError, match="not a Z-machine story file"):
        ZorkGame(_put(tmp_path / "tiny.z3", b"\x03\x00"))


def test_an_explicit_path_to_a_truncated_story_file_is_refused(tmp_path, rom_bytes):
    cut = _put(tmp_path / "cut.z3", rom_bytes[: len(rom_bytes) // 2])
    with pytest.raises(RomError, match=f"cut short: its header says {len(rom_bytes)} bytes"):
        ZorkGame(cut)
