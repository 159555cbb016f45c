"""Zork I over Jericho: the game's ground truth, read from the Z-machine.

Jericho runs ``zork1.z3`` (release 119) but has no bindings for it, so its
``get_player_location()``, ``get_object()``, ``get_score()`` and ``get_moves()`` give wrong
values. This adapter reads the truth from the Z-machine instead:

* location, score and moves are the first three global variables (a version 3 story keeps
  the status line there); the global table's address is the word at header 0x0C;
* object short names and the object tree (parent/sibling/child) come from the object table
  at header 0x0A (version 3 layout: 31 default property words, then 9-byte entries);
* the player is the object found inside the starting location under the player's name; it
  is tracked by number, so inside a vehicle (the magic boat) the inventory is still its
  children while global 0 still says which room it is in;
* death and victory are read from the response text (Jericho's flags stay false).

Where Jericho does support a game (it has bindings for its md5), the :class:`JerichoReader`
path uses Jericho's own API instead; only ``zork1.z3`` release 119 is exercised by the tests.

RAM is copied with ``frotz_lib.getRAM`` into one preallocated buffer (about 1.5 µs) instead
of ``env.get_state()`` (about 40 µs, it also copies the stack) or ``env._get_ram()``
(about 15 µs, a new numpy array every call); object names are decoded once and cached.
"""

from __future__ import annotations

import ctypes
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from memstore.errors import (
    GameError,  # noqa: F401 - importable from here too
)
from memstore.rom import check_story_file, find_rom
from memstore.triggers import ZMachineContext

#: the seed of Jericho's zork1 walkthrough; any fixed seed makes a replay deterministic
DEFAULT_SEED = 12

DEATH_RE = re.compile(r"\*{2,}\s*You have died\s*\*{2,}")
#: the last line of the victory text in the Stone Barrow (release 119)
WIN_TEXT = "You have mastered the first part of the ZORK trilogy"
#: what the game asks once it has ended (the last death, or the end of the game)
OVER_TEXT = "(Type RESTART, RESTORE, or QUIT)"
#: the version 3 status line Jericho puts in front of a response:
#: "> West of House          Score: 0        Moves: 1      \n"
STATUS_LINE_RE = re.compile(r"\A>?[^\n]*?\s{2,}Score:\s*-?\d+\s+Moves:\s*-?\d+[ \t]*\n")

#: short names of the player object in the Infocom games this adapter knows
PLAYER_NAMES = ("cretin", "yourself", "adventurer")

#: Zork I release 119 (serial 880429): the room property that lists the room's scenery, its
#: "local global" objects (the kitchen window of Behind House, the white house), which the
#: object tree does not put in the room (found by reading the story's property tables)
ZORK1_R119 = (119, b"880429")
ZORK1_SCENERY_PROPERTY = 5
#: ... and the property that lists an object's nouns as dictionary words ("rug", "carpet")
ZORK1_SYNONYM_PROPERTY = 18

# version 3 object table layout
_V3_DEFAULT_PROPS = 31
_V3_ENTRY_SIZE = 9
_V3_PARENT, _V3_SIBLING, _V3_CHILD, _V3_PROPS = 4, 5, 6, 7

_A0 = "abcdefghijklmnopqrstuvwxyz"
_A1 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_A2 = "??0123456789.,!?_#'\"/\\-:()"  # 6 = ZSCII escape, 7 = newline (v3)


@dataclass(frozen=True, slots=True)
class GameSnapshot:
    """The game's ground truth at one moment."""

    location_id: int
    location_name: str
    score: int
    moves: int
    #: (object number, short name) of what the player carries, in object-tree order
    inventory: tuple[tuple[int, str], ...]
    #: this turn's response reported the player's death
    died: bool = False
    #: the game has been won (stays True until reset)
    won: bool = False
    #: the object the player is inside when that is not the room (e.g. the magic boat)
    vehicle_id: int | None = None

    @property
    def inventory_ids(self) -> frozenset[int]:
        return frozenset(num for num, _ in self.inventory)

    @property
    def inventory_names(self) -> tuple[str, ...]:
        return tuple(name for _, name in self.inventory)


@dataclass(frozen=True, slots=True)
class StepResult:
    """One action: the state before and after it and the game's response."""

    action: str
    response: str
    before: GameSnapshot
    after: GameSnapshot
    #: the response exactly as Jericho returned it (with the status line)
    raw_response: str = field(default="", repr=False)

    @property
    def moved(self) -> bool:
        return self.before.location_id != self.after.location_id

    @property
    def score_delta(self) -> int:
        return self.after.score - self.before.score

    def context(self, first_visit: bool | None = None) -> ZMachineContext:
        return z_machine_context(self.before, self.after, self.response, first_visit)


def zork1_walkthrough() -> list[str]:
    """Jericho's Zork I walkthrough (396 actions; with seed 12 it scores 350/350 on r119)."""
    from jericho import game_info

    return game_info.zork1["walkthrough"].split("/")


def is_death(response: str) -> bool:
    return "You have died" in response and DEATH_RE.search(response) is not None


def is_win(response: str) -> bool:
    return "mastered" in response and WIN_TEXT in " ".join(response.split())


def clean_response(raw: str) -> str:
    """The response without the status line Jericho prints in front of it."""
    return STATUS_LINE_RE.sub("", raw, count=1)


def z_machine_context(
    before: GameSnapshot,
    after: GameSnapshot,
    response: str,
    first_visit: bool | None = None,
) -> ZMachineContext:
    """The trigger context for one action, with display names for the location and items."""
    inv_before = before.inventory_ids
    inv_after = after.inventory_ids
    changed = inv_before ^ inv_after
    names = {num: name for num, name in before.inventory if num in changed}
    names.update((num, name) for num, name in after.inventory if num in changed)
    return ZMachineContext(
        score_before=before.score,
        score_after=after.score,
        location_before=before.location_id,
        location_after=after.location_id,
        inventory_before=inv_before,
        inventory_after=inv_after,
        died=after.died or is_death(response),
        first_visit=first_visit,
        response_length=len(response),
        location_after_name=after.location_name or None,
        item_names=names,
    )


# --------------------------------------------------------------------------- Z-machine


def decode_zstring(mem: bytes, addr: int, abbrev_table: int, _depth: int = 0) -> str:
    """Decode a version 1-3 style Z-string (version 3 alphabets, with abbreviations)."""
    zchars: list[int] = []
    while True:
        word = (mem[addr] << 8) | mem[addr + 1]
        addr += 2
        zchars += ((word >> 10) & 31, (word >> 5) & 31, word & 31)
        if word & 0x8000:
            break
    out: list[str] = []
    alphabet = 0
    i, n = 0, len(zchars)
    while i < n:
        c = zchars[i]
        if c == 0:
            out.append(" ")
        elif c in (1, 2, 3):
            if i + 1 < n and _depth == 0:
                index = 32 * (c - 1) + zchars[i + 1]
                entry = abbrev_table + 2 * index
                word_addr = (mem[entry] << 8) | mem[entry + 1]
                out.append(decode_zstring(mem, 2 * word_addr, abbrev_table, 1))
            i += 1
        elif c == 4:
            alphabet = 1
            i += 1
            continue
        elif c == 5:
            alphabet = 2
            i += 1
            continue
        elif alphabet == 2 and c == 6:
            if i + 2 < n:
                out.append(_zscii_char((zchars[i + 1] << 5) | zchars[i + 2]))
            i += 2
        elif alphabet == 2 and c == 7:
            out.append("\n")
        else:
            out.append((_A0, _A1, _A2)[alphabet][c - 6])
        alphabet = 0
        i += 1
    return "".join(out)


def _zscii_char(code: int) -> str:
    if code == 13:
        return "\n"
    if 32 <= code <= 126:
        return chr(code)
    return "?"


class StateReader(Protocol):
    """How a snapshot is read: the Z-machine's RAM, or Jericho's bindings."""

    def reset(self) -> None: ...

    def read(self, died: bool, won: bool) -> GameSnapshot: ...

    def object_name(self, num: int) -> str: ...


class ZMachineReader:
    """Ground truth from a version 3 story's RAM: globals 0-2 and the object table."""

    def __init__(self, env, story: bytes, player_names: tuple[str, ...] = PLAYER_NAMES):
        if story[0] != 3:
            raise GameError(
                f"The Z-machine reader needs a version 3 story file (this one is version "
                f"{story[0]}); use a game Jericho fully supports instead."
            )
        self._env = env
        self._story = story
        self._player_names = player_names
        self.globals_addr = (story[0x0C] << 8) | story[0x0D]
        self.objects_addr = (story[0x0A] << 8) | story[0x0B]
        self.abbreviations_addr = (story[0x18] << 8) | story[0x19]
        self._entries = self.objects_addr + 2 * _V3_DEFAULT_PROPS
        first_props = (story[self._entries + 7] << 8) | story[self._entries + 8]
        self.object_count = (first_props - self._entries) // _V3_ENTRY_SIZE
        self._lib = env.frotz_lib
        size = self._lib.getRAMSize()
        self._buf = (ctypes.c_ubyte * size)()
        self._ram = memoryview(self._buf).cast("B")
        self._names: dict[int, str] = {}
        self.player_id = 0

    # -- raw access

    def refresh(self) -> memoryview:
        """Copy the Z-machine's dynamic memory into the buffer and return a view of it."""
        self._lib.getRAM(self._buf)
        return self._ram

    def global_var(self, index: int) -> int:
        ram = self.refresh()
        a = self.globals_addr + 2 * index
        return (ram[a] << 8) | ram[a + 1]

    def _entry(self, num: int) -> int:
        return self._entries + (num - 1) * _V3_ENTRY_SIZE

    def parent(self, num: int) -> int:
        return self.refresh()[self._entry(num) + _V3_PARENT]

    def children(self, num: int) -> list[int]:
        ram = self.refresh()
        out: list[int] = []
        child = ram[self._entry(num) + _V3_CHILD]
        while child and len(out) <= self.object_count:
            out.append(child)
            child = ram[self._entry(child) + _V3_SIBLING]
        return out

    def object_name(self, num: int) -> str:
        name = self._names.get(num)
        if name is None:
            if not 1 <= num <= self.object_count:
                return ""
            story = self._story
            props = self._entry(num) + _V3_PROPS
            table = (story[props] << 8) | story[props + 1]
            name = decode_zstring(story, table + 1, self.abbreviations_addr) if story[table] else ""
            self._names[num] = name
        return name

    def find_object(self, name: str) -> list[int]:
        return [n for n in range(1, self.object_count + 1) if self.object_name(n) == name]

    def property_bytes(self, num: int, prop: int) -> bytes:
        """The value of one property of an object as the story file defines it (b"" when
        the object has no such property); version 3 property tables."""
        if not 1 <= num <= self.object_count:
            return b""
        story = self._story
        entry = self._entry(num) + _V3_PROPS
        table = (story[entry] << 8) | story[entry + 1]
        at = table + 1 + 2 * story[table]  # after the short name
        while story[at]:
            size_byte = story[at]
            number, size = size_byte & 31, (size_byte >> 5) + 1
            if number == prop:
                return bytes(story[at + 1 : at + 1 + size])
            if number < prop:  # properties are stored in descending order
                return b""
            at += 1 + size
        return b""

    def dictionary_words(self, num: int, prop: int) -> tuple[str, ...]:
        """A property holding dictionary word addresses, decoded (version 3 keeps the
        first six letters of a word: "lanter")."""
        value = self.property_bytes(num, prop)
        words = []
        for at in range(0, len(value) - 1, 2):
            address = (value[at] << 8) | value[at + 1]
            if 0 < address < len(self._story) - 4:
                words.append(decode_zstring(self._story, address, self.abbreviations_addr))
        return tuple(word for word in words if word.isprintable() and word.strip())

    def room_objects(self, location: int, scenery_property: int | None) -> list[int]:
        """Object numbers in the room (not the player), one level inside each of them (a
        container's contents, not the player's inventory), and the room's scenery."""
        found: list[int] = []
        for num in self.children(location):
            if num == self.player_id:
                continue
            found.append(num)
            found += [inner for inner in self.children(num) if inner != self.player_id]
        if scenery_property is not None:
            for num in self.property_bytes(location, scenery_property):
                if num and num not in found and self.object_name(num):
                    found.append(num)
        return found

    # -- the player

    def reset(self) -> None:
        self.player_id = self._find_player()

    def _find_player(self) -> int:
        location = self.global_var(0)
        inside = self.children(location)
        for num in inside:
            if self.object_name(num) in self._player_names:
                return num
        # fall back: the object in the room that a global (WINNER/PLAYER) points at
        ram = self._ram
        referenced = {
            (ram[a] << 8) | ram[a + 1]
            for a in range(self.globals_addr + 2, self.globals_addr + 480, 2)
        }
        candidates = [num for num in inside if num in referenced]
        if len(candidates) == 1:
            return candidates[0]
        raise GameError(
            f"Cannot find the player object in {self.object_name(location)!r} "
            f"(objects there: {[self.object_name(n) for n in inside]})."
        )

    # -- the snapshot (the per-turn hot path: keep it lean)

    def read(self, died: bool = False, won: bool = False) -> GameSnapshot:
        self._lib.getRAM(self._buf)
        ram = self._ram
        g = self.globals_addr
        location = (ram[g] << 8) | ram[g + 1]
        score = (ram[g + 2] << 8) | ram[g + 3]
        if score & 0x8000:
            score -= 0x10000
        moves = (ram[g + 4] << 8) | ram[g + 5]
        entries = self._entries - _V3_ENTRY_SIZE  # entry(n) = entries + 9 * n
        names = self._names
        name_of = self.object_name
        player_entry = entries + _V3_ENTRY_SIZE * self.player_id
        parent = ram[player_entry + _V3_PARENT]
        child = ram[player_entry + _V3_CHILD]
        items = []
        limit = self.object_count
        while child and limit:
            name = names.get(child)
            items.append((child, name if name is not None else name_of(child)))
            child = ram[entries + _V3_ENTRY_SIZE * child + _V3_SIBLING]
            limit -= 1
        loc_name = names.get(location)
        return GameSnapshot(
            location_id=location,
            location_name=loc_name if loc_name is not None else name_of(location),
            score=score,
            moves=moves,
            inventory=tuple(items),
            died=died,
            won=won,
            vehicle_id=parent if parent and parent != location else None,
        )


class JerichoReader:
    """Ground truth from Jericho's bindings, for games Jericho fully supports."""

    def __init__(self, env):
        self._env = env
        self._names: dict[int, str] = {}

    @property
    def player_id(self) -> int:
        return self._env.player_obj_num

    def reset(self) -> None:
        pass

    def object_name(self, num: int) -> str:
        name = self._names.get(num)
        if name is None:
            obj = self._env.get_object(num)
            name = obj.name if obj is not None else ""
            self._names[num] = name
        return name

    def read(self, died: bool = False, won: bool = False) -> GameSnapshot:
        env = self._env
        location = env.get_player_location()
        items = tuple((obj.num, obj.name) for obj in env.get_inventory())
        return GameSnapshot(
            location_id=location.num if location is not None else 0,
            location_name=location.name if location is not None else "",
            score=env.get_score(),
            moves=env.get_moves(),
            inventory=items,
            died=died or env.game_over(),
            won=won or env.victory(),
        )


# --------------------------------------------------------------------------- the game


class ZorkGame:
    """Zork I in Jericho, with the Z-machine's ground truth before and after each action.

    ``reader`` picks how state is read: ``"auto"`` uses Jericho's API when Jericho fully
    supports the story file and the Z-machine's RAM otherwise; ``"zmachine"`` or
    ``"jericho"`` force one. Without ``rom_path`` the story file comes from ``find_rom()``
    (checked against release 119's sha256); an explicit path may be any story file, and
    is only checked to be one (``check_story_file``), since Frotz ends the process on a
    broken file.
    """

    def __init__(
        self,
        rom_path: str | Path | None = None,
        seed: int | None = DEFAULT_SEED,
        reader: str = "auto",
    ):
        from jericho import FrotzEnv
        from jericho.jericho import UnsupportedGameWarning

        path = find_rom() if rom_path is None else Path(rom_path)
        self.rom_path = path
        self.story = check_story_file(path)
        with warnings.catch_warnings():
            # release 119 has no Jericho bindings: the Z-machine reader covers that
            warnings.simplefilter("ignore", UnsupportedGameWarning)
            self.env = FrotzEnv(str(path), seed=seed)
        self.seed = seed
        self.fully_supported = bool(self.env.is_fully_supported and self.env.bindings)
        if reader == "auto":
            reader = "jericho" if self.fully_supported else "zmachine"
        if reader == "jericho":
            self.reader: ZMachineReader | JerichoReader = JerichoReader(self.env)
        elif reader == "zmachine":
            self.reader = ZMachineReader(self.env, self.story)
        else:
            raise ValueError(f"reader must be 'auto', 'zmachine' or 'jericho', not {reader!r}")
        self.reader_kind = reader
        release = (self.story[2] << 8) | self.story[3]
        self.zork1_r119 = (release, bytes(self.story[0x12:0x18])) == ZORK1_R119
        self._scenery_property = ZORK1_SCENERY_PROPERTY if self.zork1_r119 else None
        self._words: dict[int, tuple[str, ...]] = {}
        self._won = False
        self._over = False
        self._started = False
        self._closed = False

    # -- lifecycle

    def _check_open(self) -> None:
        if self._closed:
            raise GameError("This game was closed; start a new ZorkGame.")

    def reset(self) -> tuple[str, GameSnapshot]:
        """Start a new game; return the opening text and the first snapshot."""
        self._check_open()
        response, _info = self.env.reset()
        self.reader.reset()
        self._won = False
        self._over = False
        self._started = True
        return response, self.reader.read(False, False)

    def step(self, action: str) -> StepResult:
        """Send one command; return the response with the state before and after it."""
        self._check_open()
        if not self._started:
            self.reset()
        before = self.reader.read(False, self._won)
        raw, _reward, _done, _info = self.env.step(action)
        response = clean_response(raw)
        died = is_death(response)
        if not self._won and is_win(response):
            self._won = True
        if OVER_TEXT in response:
            self._over = True
        after = self.reader.read(died, self._won)
        return StepResult(action, response, before, after, raw)

    def snapshot(self) -> GameSnapshot:
        """The state now (``died`` is a per-turn event, so it is False here)."""
        self._check_open()
        if not self._started:
            self.reset()
        return self.reader.read(False, self._won)

    def object_name(self, num: int) -> str:
        return self.reader.object_name(num)

    def room_objects(self) -> tuple[tuple[int, str], ...]:
        """(object number, short name) of what is in the player's room by the Z-machine's
        object tree: the objects there (not the player), one level inside each (a shut
        mailbox's leaflet too: the tree does not say what is visible), and, for Zork I
        release 119, the room's scenery (its local-global objects, such as the kitchen
        window). Inside a vehicle, what else is in it. Empty with Jericho's reader."""
        self._check_open()
        reader = self.reader
        if not isinstance(reader, ZMachineReader):
            return ()
        snapshot = reader.read(False, self._won)
        numbers = reader.room_objects(snapshot.location_id, self._scenery_property)
        if snapshot.vehicle_id is not None:
            numbers += [
                n
                for n in reader.children(snapshot.vehicle_id)
                if n != reader.player_id and n not in numbers
            ]
        return tuple((n, name) for n in numbers if (name := reader.object_name(n)))

    def object_words(self, num: int) -> tuple[str, ...]:
        """The nouns the parser knows an object by, from the story's dictionary (Zork I
        release 119 only; () otherwise): the carpet is also the "rug". Version 3 keeps six
        letters ("lanter"), which the parser accepts as typed."""
        words = self._words.get(num)
        if words is None:
            reader = self.reader
            words = (
                reader.dictionary_words(num, ZORK1_SYNONYM_PROPERTY)
                if self.zork1_r119 and isinstance(reader, ZMachineReader)
                else ()
            )
            self._words[num] = words
        return words

    def game_over(self) -> bool:
        """The game has ended (the last death, or the end): it asks to restart, restore or
        quit and takes no other command (Jericho's ``game_over`` is true after any death
        in Zork I, though the game goes on after the first two)."""
        self._check_open()
        return self._over

    @property
    def player_id(self) -> int:
        return self.reader.player_id

    def steps(self, actions: list[str]) -> Iterator[StepResult]:
        for action in actions:
            yield self.step(action)

    def close(self) -> None:
        """Free the emulator's memory; the game cannot be used afterwards."""
        if not self._closed:
            self._closed = True
            self.env.close()

    def __enter__(self) -> ZorkGame:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
