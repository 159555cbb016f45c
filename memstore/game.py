"""Zork I over Jericho: the game's ground truth, read from the Z-machine.

Jericho runs ``zork1.z3`` (release 119) but has no bindings for it, so its
``get_player_location()``, ``get_object()``, ``get_score()`` and ``get_moves()`` give wrong
values. The adapter reads the truth from the Z-machine instead (memstore.zmachine: the
globals, the object table and the player object) and death and victory from the response
text (Jericho's flags stay false). Where Jericho does support a game, its own API is used.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from memstore.errors import (
    GameError,  # (importable from here too)
)
from memstore.game_commands import command_refusal, needs_move_check
from memstore.rom import check_story_file, find_rom
from memstore.triggers import ZMachineContext

# the Z-machine's ground truth (memstore.zmachine), importable from here too
from memstore.zmachine import (
    PLAYER_NAMES,  # noqa: F401
    GameSnapshot,
    JerichoReader,
    StateReader,  # noqa: F401
    ZMachineReader,
    decode_zstring,  # noqa: F401
)

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

#: Zork I release 119 (serial 880429): the room property that lists the room's scenery, its
#: "local global" objects (the kitchen window of Behind House, the white house), which the
#: object tree does not put in the room (found by reading the story's property tables)
ZORK1_R119 = (119, b"880429")
ZORK1_SCENERY_PROPERTY = 5
#: ... and the property that lists an object's nouns as dictionary words ("rug", "carpet")
ZORK1_SYNONYM_PROPERTY = 18


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
        """Send one command; return the response with the state before and after it.

        A line that is not one game command (``memstore.game_commands``: several joined,
        or one that writes or reads a file or ends the game) is refused, GameError, and
        nothing is played; so is a line the Z-machine's move counter shows played more
        than one move, after the game is put back as it was."""
        self._check_open()
        refused = command_refusal(action)
        if refused is not None:
            raise GameError(f"not played: {action[:60]!r} {refused}")
        if not self._started:
            self.reset()
        before = self.reader.read(False, self._won)
        saved = self.env.get_state() if needs_move_check(action) else None
        raw, _reward, _done, _info = self.env.step(action)
        response = clean_response(raw)
        died = is_death(response)
        won = self._won or is_win(response)
        after = self.reader.read(died, won)
        if saved is not None and after.moves - before.moves > 1:
            self.env.set_state(saved)
            raise GameError(
                f"not played: {action[:60]!r} played {after.moves - before.moves} moves: "
                f"one command at a time (the game is as it was before it)"
            )
        self._won = won
        if OVER_TEXT in response:
            self._over = True
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
