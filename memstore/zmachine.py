"""Reading Zork I's ground truth from the Z-machine (memstore.game plays the game with it).

Jericho runs ``zork1.z3`` (release 119) but has no bindings for it, so its
``get_player_location()``, ``get_object()``, ``get_score()`` and ``get_moves()`` give wrong
values. :class:`ZMachineReader` reads the truth from the Z-machine instead:

* location, score and moves are the first three global variables (a version 3 story keeps
  the status line there); the global table's address is the word at header 0x0C;
* object short names and the object tree (parent/sibling/child) come from the object table
  at header 0x0A (version 3 layout: 31 default property words, then 9-byte entries);
* the player is the object found inside the starting location under the player's name; it
  is tracked by number, so inside a vehicle (the magic boat) the inventory is still its
  children while global 0 still says which room it is in;
* death and victory are read from the response text by memstore.game (Jericho's flags
  stay false) and passed to ``read``.

Where Jericho does support a game (it has bindings for its md5), the :class:`JerichoReader`
path uses Jericho's own API instead; only ``zork1.z3`` release 119 is exercised by the tests.

RAM is copied with ``frotz_lib.getRAM`` into one preallocated buffer (about 1.5 µs) instead
of ``env.get_state()`` (about 40 µs, it also copies the stack) or ``env._get_ram()``
(about 15 µs, a new numpy array every call); object names are decoded once and cached.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Protocol

from memstore.errors import GameError

#: short names of the player object in the Infocom games this adapter knows
PLAYER_NAMES = ("cretin", "yourself", "adventurer")

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
