"""A writer process for the concurrent review tests (tests/test_review_concurrent.py).

Usage:
    python tests/review_writer.py loop DB NAME LOG SECONDS MAX_OPS SEED LOCATION...
        add, supersede and invalidate memories at LOCATIONs (the writer's own) for at most
        SECONDS or MAX_OPS operations; every acknowledged write (a call that returned True)
        is appended to LOG as one JSON line and flushed before the next call.
    python tests/review_writer.py supersede DB LOCATION OLD_TITLE NEW_TITLE NEW_TEXT
    python tests/review_writer.py invalidate DB LOCATION TITLE REASON
        one write; prints "ack" when the call returned True, "refused" otherwise.
"""

from __future__ import annotations

import json
import random
import sys
import time

from memstore.errors import StoreBusy
from memstore.models import Category, Memory, Persistence
from memstore.store import MemoryStore


def memory(title: str, text: str, turn: int) -> Memory:
    return Memory(
        category=Category.NOTE,
        title=title,
        text=text,
        episode=1,
        turns=str(turn),
        persistence=Persistence.PERMANENT,
    )


def loop(argv: list[str]) -> None:
    db, name, log_path = argv[0], argv[1], argv[2]
    seconds, max_ops, seed = float(argv[3]), int(argv[4]), int(argv[5])
    locations = [int(value) for value in argv[6:]]
    rng = random.Random(seed)
    live: dict[int, list[str]] = {location: [] for location in locations}
    counts = {"add": 0, "supersede": 0, "invalidate": 0, "refused": 0, "busy": 0}
    deadline = time.monotonic() + seconds
    with MemoryStore.open(db) as store, open(log_path, "a", encoding="utf-8") as log:

        def ack(**record: object) -> None:
            log.write(json.dumps(record) + "\n")
            log.flush()

        for op in range(max_ops):
            if time.monotonic() > deadline:
                break
            location = rng.choice(locations)
            titles = live[location]
            roll = rng.random()
            title = f"{name} m{op}"
            text = f"{title} text"
            try:
                if len(titles) < 2 or roll < 0.45:
                    if store.add_memory(location, f"Room {location}", memory(title, text, op)):
                        titles.append(title)
                        counts["add"] += 1
                        ack(kind="add", location=location, title=title, text=text)
                    else:
                        counts["refused"] += 1
                elif roll < 0.8:
                    old = rng.choice(titles)
                    titles.remove(old)
                    if store.supersede_memory(
                        location, f"Room {location}", old, memory(title, text, op)
                    ):
                        titles.append(title)
                        counts["supersede"] += 1
                        ack(
                            kind="supersede",
                            location=location,
                            title=old,
                            successor=title,
                            text=text,
                        )
                    else:  # the reviewer invalidated it in an import meanwhile
                        counts["refused"] += 1
                else:
                    old = rng.choice(titles)
                    titles.remove(old)
                    reason = f"{name} invalidated it at op {op}"
                    if store.invalidate_memory(location, old, reason, turn=op):
                        counts["invalidate"] += 1
                        ack(kind="invalidate", location=location, title=old, reason=reason)
                    else:
                        counts["refused"] += 1
            except StoreBusy:
                counts["busy"] += 1  # nothing was written, nothing acknowledged
            time.sleep(rng.uniform(0, 0.004))
    print(json.dumps(counts), flush=True)


def one_write(kind: str, argv: list[str]) -> None:
    db, location = argv[0], int(argv[1])
    with MemoryStore.open(db) as store:
        if kind == "supersede":
            old, new, text = argv[2], argv[3], argv[4]
            ok = store.supersede_memory(location, f"Room {location}", old, memory(new, text, 40))
        else:
            ok = store.invalidate_memory(location, argv[2], argv[3], turn=40)
    print("ack" if ok else "refused", flush=True)


def main() -> None:
    kind, argv = sys.argv[1], sys.argv[2:]
    if kind == "loop":
        loop(argv)
    elif kind in ("supersede", "invalidate"):
        one_write(kind, argv)
    else:
        raise SystemExit(f"unknown command {kind!r}")


if __name__ == "__main__":
    main()
