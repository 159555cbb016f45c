"""The reviewer's edits that replacing a Memories.md with a fresh export would lose
(``edits_at_risk``), and the import that would take them first. Reads the database only.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from memstore.export_file import BOM, foreign_file

__all__ = ["EditsAtRisk", "edits_at_risk", "import_advice"]


@dataclass(frozen=True)
class EditsAtRisk:
    """What replacing an existing Memories.md would lose, found by ``edits_at_risk``.

    ``message`` is one line (naming the file, the edits and what to do). ``final`` is True
    when the file is this database's export (compared 3-way against its base): its edits
    stay edits whatever the database learns meanwhile. A file exported from another
    database (or with a base this database never had) is compared 2-way against the
    database now, so the answer can change as the database does.
    """

    message: str
    final: bool


def edits_at_risk(
    store: Any, path: str | Path, text: str, db_arg: str | None = None
) -> EditsAtRisk | None:
    """None when replacing the file ``path`` (whose text is ``text``) with a fresh export
    of ``store`` loses nothing; else what it would lose. Reads the database only.

    The test is the dry run of ``memstore import`` of the file (the same parse, merge and
    plan). A file with a base line (a memstore export) is at risk when that plan would
    change anything: a changed, added or deleted memory, a changed location, a conflict
    or a problem. A file that is exactly what was exported, or whose edits were imported,
    is not, however the database changed since. A Memories.md with no base line
    (hand-written, or an older memstore's export: compared 2-way) is at risk when it holds
    a memory the database lacks or has otherwise, a conflict or a problem; not for the
    memories the database learned after it was written. An empty file is not at risk; a
    file that is no Memories.md at all (no ``# Location Memories`` title, no base line, no
    location section) is (``foreign_file``: an export replaces only a file of its kind).
    ``db_arg``, the ``--db`` the command was given, goes into the import it advises.
    """
    from exporters.parse import parse_memories_md_rows
    from exporters.render import FILE_TITLE
    from memstore.store_import import deletions_past_a_cut, import_memories

    parsed = parse_memories_md_rows(text)
    with_base = parsed.base is not None
    if foreign_file(
        text, lambda body: with_base or body.startswith(FILE_TITLE) or bool(parsed.locations)
    ):
        return EditsAtRisk(
            f"{path} is not a Memories.md (no {FILE_TITLE!r} title, no location section): "
            "give another file, or pass --force to overwrite it",
            final=True,
        )
    if not text.removeprefix(BOM).strip():
        return None  # empty: nothing to lose
    outcome = import_memories(store, text, apply=False, parsed=parsed)
    plan = outcome.plan
    # the deletions are imported by --prune, which meets what it meets (a memory the file
    # deleted that an agent changed since is a conflict): the advice is that import's
    deletes = outcome.base is not None and bool(plan.missing)
    advised = outcome
    if deletes:
        advised = import_memories(store, text, apply=False, parsed=parsed, prune=True)
    met = max(0, len(advised.plan.conflicts) - len(plan.conflicts))  # (by --prune only)
    # compared 2-way (a base this database cannot use), a memory only the database has
    # was deleted in the file or learned after it was written: which, it cannot tell, so
    # it is at risk, but it is no deletion to import (--prune would take the agents' too).
    # A file with no base at all is not at risk for it (see above).
    three_way = outcome.base is not None
    unknown = len(plan.missing) if with_base and not three_way else 0
    new_locations = sum(1 for change in plan.locations if change.is_new)
    # a retitle, move or turns fix of a memory the file dropped is one edit, which only
    # --prune imports (its problem and the old memory "deleted" are that one edit)
    replaced = sum(1 for problem in plan.problems if problem.pruned) if three_way else 0
    counts = (
        (len(plan.changed) + len(plan.status_changed), "changed"),
        (len(plan.added), "added"),
        (
            replaced,
            "retitled, moved or with new turns (only --prune imports "
            f"{'it' if replaced == 1 else 'them'})",
        ),
        (max(0, len(plan.missing) - replaced - met) if three_way else 0, "deleted"),
        (
            unknown,
            "missing from the file (removed there, or learned by the database since: "
            "compared 2-way, it cannot tell which)",
        ),
        (new_locations, "new location" if new_locations == 1 else "new locations"),
        (len(plan.locations) - new_locations, "location(s) changed"),
        (len(plan.conflicts) + met, "in conflict with the database"),
        (
            len(plan.left_again),
            "holding a value the database had since the export and went back from (an "
            "import keeps the database's)",
        ),
        (len(plan.problems) - replaced, "with problems"),
    )
    total = sum(count for count, _what in counts)
    if not total:
        return None
    if total == len(plan.left_again) and outcome.base is not None:  # nothing to import
        return EditsAtRisk(  # (review S6 G F6: "import it first" did nothing)
            f"{path} holds {total} value(s) the database had since the export and went back "
            f"from (imported before, then taken back by a later change: an import keeps the "
            f"database's); keep the file elsewhere, or pass --force to overwrite it",
            final=True,
        )
    parts = ", ".join(f"{count} {what}" for count, what in counts if count)
    cut = deletes and bool(deletions_past_a_cut(advised.plan, parsed))
    if cut:  # the advice: the end line put back, then the import (with the other guards)
        advised = import_memories(
            store, text, apply=False, parsed=replace(parsed, ended=True), prune=True
        )
    import_it = import_advice(
        path,
        advised.plan,
        prune=deletes,
        force=deletes and advised.prune_guard is not None,
        cut=cut,
        db_arg=db_arg,
    )
    if not with_base:
        return EditsAtRisk(
            f"{path} has no export base line (hand-written, or an older memstore's export) "
            f"and holds {total} edit(s) the database does not have ({parts}); {import_it}",
            final=True,
        )
    if outcome.base is None:  # compared 2-way: not this database's export as it was
        return EditsAtRisk(
            f"{path} was exported from another database (or from this one restored from "
            f"a backup) and differs from it: {total} edit(s) ({parts}) would be lost; "
            f"{import_it}",
            final=False,
        )
    return EditsAtRisk(
        f"{path} holds {total} edit(s) that were not imported ({parts}); {import_it}",
        final=True,
    )


def import_advice(
    path: str | Path,
    plan: Any,
    *,
    prune: bool,
    force: bool,
    cut: bool,
    db_arg: str | None = None,
) -> str:
    """What to do about a file's edits that were not imported: the import that takes them,
    or ``--force``. A conflict stops a plain ``--apply``, and a problem stops any import
    but ``--skip-invalid``; an import that resolved them by leaving those edits out
    (``--ours``, ``--skip-invalid``) leaves them in the file, so only ``--force`` replaces
    it then (the file is compared again, and they are still not in the database). A
    problem ``--prune`` resolves (a retitle: ``ImportProblem.pruned``) needs no fixing;
    ``force``: ``--prune`` needs ``--force`` too (a guard: more than 10% deleted ...);
    ``cut``: the file does not end with the export's end line and drops whole sections
    (cut short?); ``plan`` is then the import of the file with its end line put back.
    ``db_arg``: the command's ``--db``, named in the import (review S5 D F9)."""
    server = db_arg is not None and "://" in db_arg  # (its password is not printed)
    named: tuple[str, ...] = ()
    if db_arg and not server:
        named = (f"--db={db_arg}",) if db_arg.startswith("-") else ("--db", db_arg)
    flags = ["--apply", *["--prune"] * prune, *["--force"] * force]
    flags += ["--theirs"] * bool(plan.conflicts)
    # (a file named like an option goes after "--", the options before it)
    file = ["--", str(path)] if str(path).startswith("-") else [str(path)]
    words = ["memstore", "import", *named, *(flags + file if file[0] == "--" else file + flags)]
    command = shlex.join(words)  # (to paste: the database named, the paths quoted)
    if server:
        command += " with the same --db"
    problems = [p for p in plan.problems if not (prune and p.pruned)]
    if plan.conflicts:
        command += ", to take the file's side of the conflicts"
    if problems:
        command = f"fix its problems, then {command}"
    if cut:
        return (
            f"it does not end with its end line, which memstore writes last: if it was cut "
            f"short, pass --force to overwrite it; if its reviewer deleted those sections, "
            f"put the end line back at its end, then import it ({command})"
        )
    if not plan.conflicts and not problems:
        return f"import it first ({command}) or pass --force to overwrite it"
    left_out = " and ".join(
        what
        for what, present in (
            ("conflicts resolved with --ours", plan.conflicts),
            ("problems skipped with --skip-invalid", problems),
        )
        if present
    )
    return (
        f"import it first ({command}) or pass --force to overwrite it: the edits an import "
        f"leaves out ({left_out}) stay in the file, and only --force replaces it"
    )
