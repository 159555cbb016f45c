"""Rebuild a database's memories from another's decision log, without any LLM."""

from __future__ import annotations

from memstore.errors import RebuildFailed
from memstore.store import AppliedSynthesis, MemoryStore


def rebuild_from_log(source: MemoryStore, target: MemoryStore) -> int:
    """Re-apply every recorded decision of ``source`` onto ``target``, without any LLM.

    Returns how many decisions were replayed. Persistent memories come out the same as in
    ``source`` (ephemeral ones too, while in the same episode). All or nothing: one
    transaction on ``target``; a row that cannot be applied raises RebuildFailed naming it,
    and nothing is written.
    """
    replayed = 0
    episode = None
    with target.transaction():
        for row in source.decision_log():
            if not row["applied"]:
                continue
            try:
                applied = AppliedSynthesis.model_validate_json(row["applied"])
                if episode is not None and applied.episode != episode:
                    target.reset_episode()  # ephemeral memories never outlive their episode
                episode = applied.episode
                target.apply_synthesis(
                    applied.location_id,
                    applied.location_name,
                    new_memory=applied.new_memory,
                    supersede_titles=applied.superseded,
                    invalidate_titles=applied.invalidated,
                    invalidation_reason=applied.invalidation_reason,
                    episode=applied.episode,
                    turn=applied.turn,
                )
            except (ValueError, TypeError) as exc:  # a pydantic ValidationError too
                raise RebuildFailed(
                    f"decision-log row {row['id']} (episode {row['episode']}, turn "
                    f"{row['turn']}, location {row['location_id']}) could not be applied "
                    f"({_first_line(exc)}); nothing was written to the target"
                ) from exc
            replayed += 1
    return replayed


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().split("\n")
    return (text[0] if text else type(exc).__name__)[:200]
