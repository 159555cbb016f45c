"""``memstore import``: parse, merge, plan and apply a Memories.md in one transaction.

Part of the store layer: it runs inside ``MemoryStore.transaction()`` and nothing else of
the store's. The memories flow as plain rows (``memstore.models.MemoryRow``) from the file
(``exporters.parse.parse_memories_md_rows``) and the database (``memstore.md_store``)
through the 3-way merge (``memstore.merge``) and the plan (``memstore.importing``) to the
writes (``memstore.import_apply``), with no pydantic object built per memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from exporters.base_line import END_LINE, ExportBase
from exporters.line_parser import Problem
from exporters.parse import ParsedRows, ParseResult, parse_memories_md_rows
from memstore.errors import ImportConflict, ImportRefused, MemstoreError  # noqa: F401 - importable from here too
from memstore.import_apply import apply_plan
from memstore.import_plan import MemoryChange
from memstore.importing import ImportPlan, LineFinder, plan_import
from memstore.invariants import check_invariants
from memstore.md_rows import LocationRow, LocationRows, MemoryRow
from memstore.md_store import location_rows, stored_rows, stored_rows_at
from memstore.merge import Resolution, StoredMemory, merge_import
from memstore.versions import identity, names_since, rows_fingerprint

__all__ = [
    "ImportConflict",
    "ImportOutcome",
    "ImportRefused",
    "apply_import",
    "apply_plan",
    "deletions_past_a_cut",
    "import_memories",
]


def apply_import(store: Any, plan: ImportPlan, *, prune: bool) -> None:
    """Write ``plan`` to ``store`` in one transaction (any exception rolls everything back);
    ``prune`` deletes the memories missing from the file only when the plan has no
    problems. See ``memstore.import_apply.apply_plan`` for the order of the writes."""
    with store.transaction() as conn:
        apply_plan(conn, plan, prune=prune and plan.ok)


# --- the whole import in one transaction --------------------------------------------------

#: ``--prune`` refuses, without ``--force``, to delete more than this share of the
#: persistent memories
PRUNE_LIMIT = 0.10


@dataclass(frozen=True)
class ImportOutcome:
    """What an import planned, whether it wrote it, and why not if it did not."""

    plan: ImportPlan
    applied: bool
    #: why nothing was written (problems, conflicts, a prune guard); None when applied or
    #: when a dry run would apply
    refused: str | None
    base: ExportBase | None
    #: what ``--prune`` would be refused for without ``--force`` (a file with no location
    #: section, a 2-way file, an export that does not end with its end line and has no
    #: section for a location whose memories it would delete, more than PRUNE_LIMIT of the
    #: memories), whether or not asked
    prune_guard: str | None = None


def import_memories(
    store: Any,
    text: str,
    *,
    apply: bool,
    prune: bool = False,
    resolution: Resolution | None = None,
    skip_invalid: bool = False,
    force: bool = False,
    parsed: ParseResult | ParsedRows | None = None,
) -> ImportOutcome:
    """Import the text of a Memories.md into ``store``: parse, merge, plan and (``apply``)
    write, all inside ONE transaction, so what the plan saw is what it changes.

    The file's export base (``exporters.base_line``) makes it a 3-way merge
    (``memstore.merge``); conflicts are resolved by ``resolution`` (ours, theirs, skip),
    and without one nothing is applied. ``skip_invalid`` applies the rest of a file with
    problems (and skips conflicting memories). ``prune`` deletes the memories the reviewer
    removed, but refuses without ``force`` a file with no location sections, a deletion
    at a location an export with no end line has no section for (cut short?), or a
    deletion of more than 10% of the persistent memories. The result is checked against the
    database's rules (``memstore.invariants``) before the commit: a breach rolls it all
    back (ImportRefused). A dry run computes the same plan, read-only.
    """
    if parsed is None or isinstance(parsed, ParseResult):
        # (a ParseResult, the models, does not say where the file may be cut short: the
        # rows are read again, which is cheap beside building the models)
        parsed = parse_memories_md_rows(text)
    if resolution is not None:  # ("theirs" names it as well; anything else: ValueError)
        resolution = Resolution(resolution)
    if skip_invalid and resolution is None:
        resolution = Resolution.SKIP
    lines = LineFinder(text)
    with store.transaction(write=apply) as conn:
        current = stored_rows(conn)
        current_locations = {row.id: row for row in location_rows(conn)}
        here = identity(conn)
        base, warnings = _usable_base(parsed.base, here, store.target.display)
        since: dict[int, list[MemoryRow]] = {}  # states the database left since the base
        changed_at: dict[int, int] = {}  # each memory changed since: when, first
        base_state = (
            stored_rows_at(conn, base.version, current, since, changed_at) if base else None
        )
        if base is not None and base_state is not None and base.rows is not None:
            if rows_fingerprint(base_state.values()) != base.rows:
                warnings = (
                    *warnings,
                    f"the database's memories at change {base.version} are not the ones the "
                    f"file was exported with (a database restored from a backup and written "
                    f"since?): compared 2-way, as a file with no base",
                )
                base, base_state = None, None
        parsed = _cut_short(parsed)
        merged = merge_import(
            parsed.locations,
            current,
            current_locations,
            base_state,
            resolution=resolution,
            prune=prune,
            lines=lines,
            warnings=warnings,
            base_names=names_since(conn, base.version) if base is not None else None,
            since=since,
            changed_at=changed_at,
        )
        grouped, current_ids = _grouped(current, current_locations)
        plan = plan_import(
            grouped,
            merged.locations,
            (*parsed.problems, *merged.problems),
            lines=lines,
            prune=prune,
            conflicts=merged.conflicts,
            warnings=merged.warnings,
            left_again=merged.left_again,
            retitled=merged.retitled,
            unseen=merged.unseen,
            row_ids=merged.row_ids,
            current_ids=current_ids,
        )
        guard = _prune_guard(plan, parsed, len(current), two_way=base is None)
        refused = _refusal(plan, prune, resolution, skip_invalid, force, guard)
        pending = plan.has_changes or (prune and plan.ok and bool(plan.missing))
        if not apply or refused is not None or not pending:
            return ImportOutcome(plan, False, refused, base, guard)
        apply_plan(
            conn,
            plan,
            prune=prune and plan.ok,
            base_version=base.version if base is not None else None,
        )
        broken = check_invariants(conn)
        if broken:
            raise ImportRefused(
                f"the import would break the database's rules ({broken[0]}"
                f"{f'; and {len(broken) - 1} more' if len(broken) > 1 else ''}); "
                f"nothing was written"
            )
    return ImportOutcome(plan, True, None, base, guard)


def _cut_short(parsed: ParsedRows) -> ParsedRows:
    """A file with an export base whose last section no "---" line closes and that does
    not end with its end line: cut short while it was written (an editor's crash, a full
    disk, a copy that stopped)? That section is skipped, a problem (its last memory's text
    may be cut anywhere), also one the file adds (reviews I F2, J J2: its memories' texts
    were stored as far as the cut)."""
    if parsed.open_end is None:
        return parsed
    line, location_id = parsed.open_end
    problem = Problem(
        line,
        f"the file ends inside location {location_id}'s section, which no '---' line closes "
        f"(memstore closes every section with one), with no end line: cut short? the "
        f"section is skipped (if it is whole, close it with a '---' line)",
        (location_id, None, None),
    )
    kept = tuple(entry for entry in parsed.locations if entry.location.id != location_id)
    return replace(parsed, locations=kept, problems=(*parsed.problems, problem), open_end=None)


def _usable_base(
    base: ExportBase | None, here: ExportBase, where: str
) -> tuple[ExportBase | None, tuple[str, ...]]:
    if base is None:
        return None, (
            "the file has no export base (hand-written, or exported by an older memstore): "
            "changes made in the database since it was written cannot be told apart from "
            "edits in the file; a status is never moved back from SUPERSEDED without --theirs",
        )
    if base.database_id != here.database_id and here.version == 0:
        return None, (
            f"the file was exported from another database ({base.database_id}); this one "
            f"is new (nothing written to it yet): compared 2-way, as a file with no base",
        )
    if base.database_id != here.database_id:
        return None, (
            f"the file was exported from another database ({base.database_id}), not "
            f"{where} ({here.database_id}): compared 2-way, as a file with no base",
        )
    if base.version > here.version:
        return None, (
            f"the file says it was exported at change {base.version}, but the database is "
            f"only at {here.version} (restored from a backup?): compared 2-way",
        )
    return base, ()


def _grouped(
    current: list[StoredMemory[MemoryRow]], locations: dict[int, LocationRow]
) -> tuple[list[LocationRows], dict[int, list[int]]]:
    """The memories by location (locations by id), and their row ids in the same order."""
    by_location: dict[int, list[MemoryRow]] = {}
    ids: dict[int, list[int]] = {}
    for stored in current:
        by_location.setdefault(stored.location_id, []).append(stored.memory)
        ids.setdefault(stored.location_id, []).append(stored.id)
    grouped = [
        LocationRows(info, tuple(by_location.get(location_id, ())))
        for location_id, info in sorted(locations.items())
    ]
    return grouped, ids


def _refusal(
    plan: ImportPlan,
    prune: bool,
    resolution: Resolution | None,
    skip_invalid: bool,
    force: bool,
    guard: str | None,
) -> str | None:
    if plan.problems and not skip_invalid:
        return (
            f"the file has {len(plan.problems)} problem(s); nothing was applied "
            f"(fix them, or use --skip-invalid to apply the valid parts)"
        )
    if plan.conflicts and resolution is None:
        return (
            f"{len(plan.conflicts)} conflict(s) between the file and changes made in the "
            f"database since the export; nothing was applied (choose per run: --ours keeps "
            f"the database's side, --theirs takes the file's, --skip-invalid applies the rest)"
        )
    if not prune or force:
        return None
    return guard


def _prune_guard(
    plan: ImportPlan, parsed: ParsedRows, persistent: int, *, two_way: bool
) -> str | None:
    """What ``--prune`` is refused for without ``--force``: None when nothing (or when
    the file has problems that --prune does not resolve: then it deletes nothing)."""
    if not plan.missing or any(not problem.pruned for problem in plan.problems):
        return None
    if not parsed.locations:
        return (
            f"the file has no location sections: --prune would delete every memory "
            f"({len(plan.missing)} of {persistent}); refused without --force"
        )
    if two_way:  # no base to tell a reviewer's removal from what agents learned since
        return (
            f"the file is compared 2-way (no export base this database can use): --prune "
            f"would delete {len(plan.missing)} memor{'y' if len(plan.missing) == 1 else 'ies'} "
            f"only the database has ({_named(plan.missing)}), which agents may have learned "
            f"after the file was written; refused without --force"
        )
    absent = deletions_past_a_cut(plan, parsed)
    if absent:
        places = len({change.location_id for change in absent})
        return (
            f"the file does not end with its end line ({END_LINE}), which memstore writes "
            f"last: cut short after a '---' line? --prune would delete {len(absent)} "
            f"memor{'y' if len(absent) == 1 else 'ies'} at {places} "
            f"location{'' if places == 1 else 's'} the file has no section for "
            f"({_named(absent)}); if the file is whole, put the line back at its end, or "
            f"pass --force"
        )
    if len(plan.missing) > PRUNE_LIMIT * persistent:
        return (
            f"--prune would delete {len(plan.missing)} of {persistent} persistent memories "
            f"(more than {PRUNE_LIMIT:.0%}); refused without --force"
        )
    return None


def deletions_past_a_cut(plan: ImportPlan, parsed: ParsedRows) -> list[MemoryChange]:
    """The deletions of ``plan`` (``--prune``'s) at locations the file has no section for,
    when it is an export (a base line) that does not end with its end line
    (``exporters.base_line``): cut short right after a section's "---" line, the file
    reads as one whose reviewer deleted the sections after it. Empty for a whole file."""
    if parsed.base is None or parsed.ended or not plan.missing:
        return []
    sections = {entry.location.id for entry in parsed.locations}
    return [change for change in plan.missing if change.location_id not in sections]


def _named(missing: Sequence[MemoryChange], shown: int = 3) -> str:
    """The first few memories of ``missing`` by location and title, and how many more."""
    named = ", ".join(
        f"location {change.location_id} {change.old.title[:60]!r}"
        for change in missing[:shown]
        if change.old is not None
    )
    return named + (f" and {len(missing) - shown} more" if len(missing) > shown else "")
