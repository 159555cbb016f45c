"""The evaluation's report, presented: JSON-ready data, a plain-text table, Markdown, and a
plot (matplotlib, the optional ``[plot]`` extra). Pure functions of an :class:`EvalReport`.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memstore.eval_results import (
    ARM_LABELS,
    ARMS,
    LAST_FAILURE,
    MEMORY,
    MODEL_MAJORITY,
    NO_MEMORY,
    REPEAT_KINDS,
    REPEAT_LABELS,
    ArmSummary,
    EpisodeResult,
    fmt,
    not_played_text,
)
from memstore.eval_targets import EvalReport, Target
from memstore.llm_agent import is_tool_refusal

if TYPE_CHECKING:
    from memstore.export_file import FileState


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed (``pip install 'memstore[plot]'``)."""


#: the keys every ``report_json`` has: what tells an eval report an earlier eval wrote
REPORT_KEYS = ("agent", "model", "tools", "memories_written_by", "episodes", "moves", "seeds",
               "arms", "targets")  # fmt: skip
#: how every title (``_title``) ends: the markdown table's first line is it, in bold
TITLE_END = "; figures are means over the seeds"
#: the first bytes of every PNG file (the plot)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def is_report_json(text: str) -> bool:
    """True when ``text`` is an eval report ``report_json`` wrote (an object with its keys),
    however it was indented since."""
    try:
        data = json.loads(text)
    except ValueError:
        return False
    return isinstance(data, dict) and all(key in data for key in REPORT_KEYS)


def is_report_markdown(text: str) -> bool:
    """True when ``text`` is a table ``render_markdown`` wrote: its bold title line
    (``**agent ...; figures are means over the seeds**``) and the table's header below."""
    lines = text.splitlines()
    if not lines:
        return False
    title = lines[0].strip()
    if not (title.startswith("**agent ") and title.endswith(f"{TITLE_END}**")):
        return False
    return any(line.startswith("| episode | arm |") for line in lines[1:4])


def is_png(data: bytes) -> bool:
    """True when ``data`` (a file's first bytes) is a PNG's: what a plot may replace."""
    return data.startswith(PNG_SIGNATURE)


def report_json(report: EvalReport, *, timing: bool = True) -> dict[str, Any]:
    """The report as JSON-ready data. Everything but ``timing`` (wall time, the memory
    system's overhead per turn) is the same every time for the same arguments."""
    data: dict[str, Any] = {
        "agent": report.agent,
        "model": report.model,
        "tools": report.tools,
        "memories_written_by": report.synthesis,
        "episodes": report.episodes,
        "moves": report.moves,
        "seeds": report.seeds,
        "arms": {arm: summary.as_dict() for arm, summary in report.arms.items()},
        "targets": [_target_json(t) for t in report.targets()],
    }
    if report.agent == "llm":  # the model's share of the commands; the episodes it did not play
        data["model_commands"] = {
            arm: {"model": found[0], "commands": found[1]}
            for arm, summary in report.arms.items()
            if (found := summary.model_commands()) is not None
        }
        data["model_did_not_play"] = [
            {
                "arm": e.arm,
                "seed": e.seed,
                "episode": e.episode,
                "model_turns": e.model_turns,
                "turns": e.turns,
            }  # fmt: skip
            for e in report.model_did_not_play()
        ]
    if timing:
        data["timing"] = {
            "seconds": round(report.seconds, 1),
            "overhead_us_per_turn": {arm: summary.overhead for arm, summary in report.arms.items()},
        }
    return data


def _target_json(target: Target) -> dict[str, Any]:
    """A target as JSON: ``met`` true, false, or null with ``not_judged`` (why)."""
    data: dict[str, Any] = {"target": target.name, "met": target.met, "measured": target.measured}
    if target.met is None:
        data["not_judged"] = target.not_judged
    return data


def _table_rows(report: EvalReport) -> tuple[list[str], list[list[str]]]:
    header = ["episode", "arm", "rooms", "score", "1st point", "repeats across", "within",
              "old across", "coverage"]  # fmt: skip
    rows = []
    for number in range(1, report.episodes + 1):
        for arm in ARMS:
            summary = report.arms[arm]
            rows.append(
                [
                    str(number),
                    ARM_LABELS[arm],
                    fmt(summary.mean(number, lambda e: e.rooms)),
                    fmt(summary.mean(number, lambda e: e.score)),
                    _first_point(summary, number),
                    _pct(summary.mean(number, lambda e: e.share(e.repeated_across))),
                    _pct(summary.mean(number, lambda e: e.share(e.repeated_within))),
                    _pct(summary.mean(number, lambda e: e.share(e.repeated_across_old))),
                    _pct(summary.mean(number, lambda e: e.coverage), 0),
                ]
            )
    return header, rows


def _first_point(summary: ArmSummary, number: int) -> str:
    """The mean turn of the first point over the seeds that scored in episode ``number``,
    and how many of them did when not every seed did (the means of two arms over
    different seeds are not comparable on their own: review S5 A finding 4)."""
    played = summary.by_episode(number)
    scored = sum(1 for e in played if e.first_point_turn is not None)
    mean = fmt(summary.mean(number, lambda e: e.first_point_turn), 0)
    if 0 < scored < len(played):
        return f"{mean} ({scored} of {len(played)} seeds)"
    return mean


#: the table's note when a first point cell counts the seeds that scored
FIRST_POINT_NOTE = (
    "1st point: the mean over the seeds that scored; (k of n seeds) when only k of the n "
    "scored in that episode"
)


def _notes(rows: list[list[str]]) -> list[str]:
    return [FIRST_POINT_NOTE] if any(row[4].endswith("seeds)") for row in rows) else []


def _pct(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}%}"


def _arm_lines(report: EvalReport, *, timing: bool) -> list[str]:
    lines = []
    for arm in ARMS:
        summary = report.arms[arm]
        tokens = summary.tokens
        llm = summary.llm
        line = (
            f"{ARM_LABELS[arm]}: repeated failed actions across episodes "
            f"{summary.rate('repeated_across'):.1%} (older definition "
            f"{summary.rate('repeated_across_old'):.1%}), within an episode "
            f"{summary.rate('repeated_within'):.1%} ({summary.rate('repeated_within_old'):.1%}); "
            f"memory tokens per turn median {tokens['median']:.0f}, p95 {tokens['p95']:.0f}; "
            f"LLM calls: agent {llm['agent_calls']} ({_failures(llm['agent_failures'])}), "
            f"synthesis {llm['synthesis_calls']} ({_failures(llm['synthesis_failures'])})"
        )
        if (commands := summary.model_commands()) is not None:  # the LLM agent
            line += f"; the model chose {commands[0]:,} of {commands[1]:,} commands"
        if timing:
            overhead = summary.overhead
            line += (
                f"; memory overhead per turn median {overhead['median']:.0f} us, "
                f"p95 {overhead['p95']:.0f} us"
            )
        lines.append(line)
    return lines


def _failures(found: Mapping[str, int]) -> str:
    """Failed model calls by kind, then the refused tool calls (``is_tool_refusal``) apart:
    the model answered those turns."""
    failed = {k: v for k, v in found.items() if v and not is_tool_refusal(k)}
    refused = {k: v for k, v in found.items() if v and is_tool_refusal(k)}
    text = _counts("failed", failed) if failed else "no failures"
    return f"{text}; {_counts('tool calls refused', refused)}" if refused else text


def _counts(what: str, found: Mapping[str, int]) -> str:
    return f"{sum(found.values())} {what}: " + ", ".join(
        f"{k} {v}" for k, v in sorted(found.items())
    )


def _target_lines(report: EvalReport) -> list[str]:
    """The episodes the model did not play (if any), then each target: met, NOT MET, or not
    judged and why; then what the repeats with memory were."""
    lines = []
    if short := report.model_did_not_play():
        lines.append(
            f"{not_played_text(short, f'the model ({report.model})')}: the explorer chose the "
            "rest (its fallback when a call fails or gives no command); no target is judged "
            f"on those episodes (it needs the model to choose more than "
            f"{MODEL_MAJORITY:.0%} of the commands of every episode it reads)"
        )
    for t in report.targets():
        if t.met is None:
            lines.append(f"not judged: {t.name} ({t.not_judged}; measured: {t.measured})")
        else:
            lines.append(f"{'met' if t.met else 'NOT MET'}: {t.name} (measured: {t.measured})")
    return [*lines, _why_line(report)]


def model_failure(report: EvalReport) -> str | None:
    """One line for the error ``memstore eval`` exits with when a target was not judged
    because the model did not play an episode it reads (``EvalReport.targets_not_played``):
    which, and for each arm of those (only those) how its calls failed and the last
    failure; None when no target was left unjudged for that (or the agent is the explorer)."""
    short = report.targets_not_played()
    if not short:
        return None
    parts = []
    for arm in ARMS:
        if not any(e.arm == arm for e in short):
            continue
        llm = report.arms[arm].llm
        failed = {
            kind: count
            for kind, count in llm.get("agent_failures", {}).items()
            if count and not is_tool_refusal(kind)
        }
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(failed.items())) or "none counted"
        last = llm.get(LAST_FAILURE)
        parts.append(f"{ARM_LABELS[arm]}: {kinds}" + (f", the last: {last}" if last else ""))
    text = not_played_text(short, f"the model ({report.model})")
    return (
        f"{text}: its calls failed or gave no command and the explorer chose the rest "
        f"(failed calls {'; '.join(parts)}); no target was judged on that play"
    )


def _why_line(report: EvalReport) -> str:
    """What the repeated failures with memory were, as shares of all its turns."""
    memory = report.arms[MEMORY]
    parts = [
        f"{memory.kind_rate(kind):.1%} {REPEAT_LABELS[kind]}"
        for kind in REPEAT_KINDS
        if memory.kind_rate(kind) > 0
    ]
    return "repeated failed actions with memory, across episodes, were: " + (
        "; ".join(parts) or "none"
    )


def _title(report: EvalReport) -> str:
    seeds = ", ".join(map(str, report.seeds))
    agent = report.agent if report.agent == "explorer" else f"{report.agent} ({report.model})"
    return (
        f"agent {agent}, memories by the {report.synthesis}, {report.episodes} episodes of "
        f"at most {report.moves} moves, seeds {seeds}{TITLE_END}"
    )


def render_table(report: EvalReport, *, timing: bool = True) -> str:
    """The report as a fixed-width table for the terminal."""
    header, rows = _table_rows(report)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    out = [_title(report), line(header), *map(line, rows), *_notes(rows)]
    out += _arm_lines(report, timing=timing)
    out += _target_lines(report)
    if timing:
        out.append(f"played in {report.seconds:.1f} s")
    return "\n".join(out)


def render_markdown(report: EvalReport, *, timing: bool = False) -> str:
    """The report as a markdown table (no timing by default: the same every run)."""
    header, rows = _table_rows(report)
    out = [f"**{_title(report)}**", ""]
    out.append("| " + " | ".join(header) + " |")
    out.append("|" + "|".join(" ---: " if i != 1 else " --- " for i in range(len(header))) + "|")
    out += ["| " + " | ".join(row) + " |" for row in rows]
    out.append("")
    out += [f"{note}." for note in _notes(rows)]
    out += [""] if _notes(rows) else []
    out += [f"- {line}" for line in _arm_lines(report, timing=timing)]
    out += [f"- {line}" for line in _target_lines(report)]
    return "\n".join(out) + "\n"


def plot_png(report: EvalReport) -> bytes:
    """Rooms, score, repeated failed actions and coverage by episode, both arms: the PNG's
    bytes. Raises PlotUnavailable when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise PlotUnavailable("the plot needs matplotlib: pip install 'memstore[plot]'") from exc
    numbers = list(range(1, report.episodes + 1))
    panels: list[tuple[str, Callable[[EpisodeResult], float | None], bool]] = [
        ("distinct rooms", lambda e: e.rooms, False),
        ("score", lambda e: e.score, False),
        ("repeated failed actions (across episodes)", lambda e: e.share(e.repeated_across), True),
        ("location coverage", lambda e: e.coverage, True),
    ]
    figure, axes = plt.subplots(1, len(panels), figsize=(12, 3), dpi=72)
    try:
        for axis, (title, value, percent) in zip(axes, panels, strict=True):
            for arm, style in ((MEMORY, "o-"), (NO_MEMORY, "s--")):
                summary = report.arms[arm]
                values = [summary.mean(n, value) for n in numbers]
                axis.plot(numbers, [v if v is not None else float("nan") for v in values], style,
                          label=ARM_LABELS[arm])  # fmt: skip
            axis.set_title(title, fontsize=9)
            axis.set_xlabel("episode", fontsize=8)
            axis.set_xticks(numbers)
            axis.tick_params(labelsize=8)
            if percent:
                axis.set_ylim(0, 1.05)
                axis.yaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
        axes[0].legend(fontsize=8)
        figure.suptitle(_title(report), fontsize=9)
        figure.tight_layout()
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", metadata={"Software": None})
    finally:
        plt.close(figure)
    return buffer.getvalue()


def plot_report(
    report: EvalReport,
    path: str | Path,
    *,
    warn: Callable[[str], None] | None = None,
    unchanged: FileState | None = None,
) -> Path:
    """Write ``plot_png(report)`` to ``path`` atomically (memstore.export_file's
    ``write_bytes_atomically``: a hard link to the old plot keeps the old plot; ``warn`` and
    ``unchanged`` are its). Raises PlotUnavailable when matplotlib is not installed, before
    anything is written."""
    from memstore.export_file import write_bytes_atomically

    return write_bytes_atomically(path, plot_png(report), warn=warn, unchanged=unchanged)
