"""The deterministic offline writer: the template filled from the exploration record and
computed facts (inventory, tables of statistics, figures, findings, gaps, coverage ledger).
A real report, clearly marked as written without a language model.

The same module builds the skeleton a model drafts from: the template with each section's body
replaced by a note of what belongs there.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..explore.statistics import fact_sentence
from ..folder.coverage import ledger_rows
from ..folder.groups import pattern_of as _pattern
from ..folder.scan import KINDS, ScanResult
from ..readers.descriptions import first_sentence, folder_title, main_description
from ..record import ExplorationRecord, FigureRecord, TableProfile
from ..templates import Lang, SectionSpec, Template
from .bib import Source
from .gap import Gap
from .latex import escape, format_number
from .phrases import t

STAT_COLUMNS = ("count", "mean", "std", "min", "max", "missing")
MAX_LISTED_FILES = 40


@dataclass
class WriterInput:
    template: Template
    record: ExplorationRecord
    scan: ScanResult
    gaps: list[Gap]
    sources: list[Source]
    lang: Lang = "en"
    cjk_font: str | None = None
    figures_on: bool = True


def document(inp: WriterInput, sections: list[dict[str, str]], *, offline: bool) -> dict[str, Any]:
    record = inp.record
    title = record.experiment.strip() or "Data report"
    return {
        "title": escape(title),
        "author": escape(t("author", inp.lang)),
        "date": datetime.date.today().isoformat(),
        "abstract": _abstract(record),
        "notice": escape(t("notice", inp.lang)) if offline else "",
        "sections": sections,
        "cjk_font": inp.cjk_font,
        "bibliography": bool(inp.sources) and offline,
        "lang": inp.lang,
    }


def _abstract(record: ExplorationRecord) -> str:
    """The folder's own summary of itself (with where it says so): a README that speaks for the
    whole folder, else the first sentence of each description; the goal when there is none."""
    described = [d for d in record.descriptions if d.summary]
    main = main_description(described)
    if main is not None and folder_title(described) == main.title and main.title:
        described = [main]
    if not described:
        return escape(record.goal) if record.goal else ""
    return " ".join(
        escape(d.summary if len(described) == 1 else first_sentence(d.summary)) + f" (\\texttt{{{escape(d.path)}}})"
        for d in described[:4]
    )


def offline_report(inp: WriterInput) -> str:
    """The complete LaTeX source, from the record alone."""
    sections = [{"title": escape(s.title_in(inp.lang)), "body": _body(s, inp)} for s in inp.template.sections]
    if inp.figures_on and inp.record.figures and not any(s.key in FIGURE_HOMES for s in inp.template.sections):
        sections[-1]["body"] += "\n" + _figures(inp.record.figures)
    return inp.template.render(document(inp, sections, offline=True))


def skeleton(inp: WriterInput) -> str:
    """The template with a note in place of each section's body, for a model to fill."""
    sections = []
    for spec in inp.template.sections:
        needs = ", ".join(spec.needs) or "anything relevant"
        sections.append(
            {"title": escape(spec.title_in(inp.lang)), "body": f"% Write the {spec.key} section here (uses: {needs})."}
        )
    return inp.template.render(document(inp, sections, offline=False))


# -- section bodies ---------------------------------------------------------------------------

FIGURE_HOMES = ("results", "findings")


def _body(spec: SectionSpec, inp: WriterInput) -> str:
    writer = SECTION_WRITERS.get(spec.key, _findings_body)
    body = writer(inp)
    if spec.key in FIGURE_HOMES and inp.figures_on and inp.record.figures:
        body += "\n" + _figures(inp.record.figures)
    return body


def _introduction(inp: WriterInput) -> str:
    r, lang = inp.record, inp.lang
    parts = [f"{t('experiment', lang)}: {escape(r.experiment)}."]
    background = [d for d in r.descriptions if d.summary]
    if background:
        items = [f"{escape(d.summary)} ({t('as_stated', lang)} \\texttt{{{escape(d.path)}}})" for d in background[:6]]
        parts.append(f"\\textbf{{{t('background', lang)}.}}" + ("\n" + _itemize(items, escaped=True)
                     if len(items) > 1 else " " + items[0]))  # fmt: skip
    if r.goal:
        parts.append(f"\\textbf{{{t('goal', lang)}.}} {escape(r.goal)}")
    if r.degraded:
        parts.append(escape(t("degraded", lang, reason=r.stop_reason or "budget")))
    return "\n\n".join(parts)


def _summary(inp: WriterInput) -> str:
    return _introduction(inp) + "\n\n" + _itemize(inp.record.key_findings[:3])


def _data(inp: WriterInput) -> str:
    scan, lang = inp.scan, inp.lang
    lines = [escape(t("inventory", lang, n=len(scan.files), size=_size(scan.total_size)))]
    rows = [[escape(kind), str(scan.counts.get(kind, 0))] for kind in KINDS if scan.counts.get(kind)]
    lines.append(_table([t("kind", lang), t("files", lang)], rows, "lr"))
    groups = {g.pattern: g for g in inp.record.groups}
    if groups:  # a big folder: one row per group of similar files, then the files on their own
        listed = [
            [f"\\texttt{{{escape(g.pattern)}}}", escape(t("group_of", lang, n=g.count)), _size(g.size)]
            for g in inp.record.groups
        ]
        grouped = {p for g in inp.record.groups for p in [g.pattern]}
        singles = [f for f in scan.files if _pattern(f.path) not in grouped]
    else:
        listed, singles = [], list(scan.files)
    room = max(0, MAX_LISTED_FILES - len(listed))
    listed += [[f"\\texttt{{{escape(f.path)}}}", escape(f.kind), _size(f.size)] for f in singles[:room]]
    lines.append(_longtable([t("file", lang), t("kind", lang), "Size"], listed, "p{0.55\\linewidth}ll"))
    if len(singles) > room:
        lines.append(escape(t("more_files", lang, n=len(singles) - room)))
    titled = [d for d in inp.record.descriptions if d.title]
    if titled:
        items = [f"\\texttt{{{escape(d.path)}}}: {escape(d.title or '')}" for d in titled[:MAX_LISTED_FILES]]
        lines.append(escape(t("described_by", lang)) + "\n" + _itemize(items, escaped=True))
    for d in inp.record.descriptions:
        if d.units:
            units = ", ".join(f"{q} [{u}]" for q, u in list(d.units.items())[:12])
            lines.append(escape(t("units_stated", lang, path=d.path, units=units)))
    if inp.sources:
        keys = ",".join(s.key for s in inp.sources)
        lines.append(f"{t('documents_cited', lang)} \\cite{{{keys}}}.")
    if inp.record.suspected_injections:
        lines.append(_injections(inp))
    return "\n\n".join(lines)


def _injections(inp: WriterInput) -> str:
    lang = inp.lang
    items = [
        f"\\texttt{{{escape(i.path)}}}, line {i.line}: \\emph{{{escape(i.excerpt)}}}"
        for i in inp.record.suspected_injections[:20]
    ]
    return f"\\paragraph{{{escape(t('injection', lang))}.}} {escape(t('injection_intro', lang))}\n" + _itemize(
        items, escaped=True
    )


def _what_was_done(r: ExplorationRecord, lang: Lang) -> str:
    """What the exploration actually read and made, from the tools' ledger (never the model's say-so)."""
    ledger = r.coverage
    done = t(
        "methods_done",
        lang,
        read=len(ledger.by_status("read")),
        partial=len(ledger.by_status("partial")),
        total=len(ledger.files),
        tables=len(r.tables),
        figures=len(r.figures),
    )
    unread = ledger.by_status("unread")
    if unread:
        shown = ", ".join(unread[:8]) + (", ..." if len(unread) > 8 else "")
        done += " " + t("methods_unread", lang, paths=shown)
    return done


def _methods(inp: WriterInput) -> str:
    r, lang = inp.record, inp.lang
    parts = [escape(r.methodology_notes)] if r.methodology_notes else []
    parts.append(escape(_what_was_done(r, lang)))
    if r.tables:
        parts.append(escape(t("tables_profiled", lang)))
        items = [
            f"\\texttt{{{escape(table.path)}}}: "
            + escape(t("rows_cols", lang, rows=table.part or f"{table.rows} rows", cols=", ".join(table.columns)))
            + escape(_how_read(table))
            for table in r.tables
        ]
        parts.append(_itemize(items, escaped=True))
    return "\n\n".join(parts)


def _how_read(table: TableProfile) -> str:
    """What the reader detected and decided, in words (empty for a plain table)."""
    d = table.dialect
    if not d:
        return ""
    parts = []
    delimiter = {"\t": "tab", " ": "space"}.get(str(d.get("delimiter")), repr(d.get("delimiter")))
    parts.append(f"delimiter {delimiter}, {d.get('encoding', '')}")
    if not d.get("header", True) and d.get("names_from"):
        parts.append(f"no header row (column names from {d['names_from']})")
    elif not d.get("header", True):
        parts.append("no header row (columns named column_1 ...)")
    if d.get("skipped_lines"):
        parts.append(f"{len(d['skipped_lines'])} line(s) above the table skipped")
    if table.units:
        parts.append("units: " + ", ".join(f"{c} [{u}]" for c, u in table.units.items()))
    if d.get("decimal") == ",":
        parts.append("decimal comma")
    notes = [n for n in table.notes if "skipped" not in n and not n.startswith("no header row")]
    return " Read as: " + "; ".join(parts) + "." + "".join(f" {n}." for n in notes[:3])


def _results(inp: WriterInput) -> str:
    parts = [_stats_table(table, inp.lang) for table in inp.record.tables if table.numeric_summary]
    parts.append(_findings_body(inp))
    return "\n\n".join(parts)


def _findings_body(inp: WriterInput) -> str:
    findings = inp.record.key_findings
    if not findings:
        return escape(t("no_findings", inp.lang))
    return escape(t("findings_intro", inp.lang)) + "\n" + _itemize(findings)


def _findings_with_tables(inp: WriterInput) -> str:
    return _results(inp)


def _limitations(inp: WriterInput) -> str:
    lang = inp.lang
    parts = [escape(t("gaps_intro", lang)) + "\n" + _itemize([g.message for g in inp.gaps])] if inp.gaps else []
    if not inp.gaps:
        parts.append(escape(t("no_gaps", lang)))
    if inp.record.coverage.files:
        condensed, left_out = ledger_rows(inp.record.coverage, inp.record.groups)
        rows = [[f"\\texttt{{{escape(path)}}}", escape(status), escape(amount), escape(note)]
                for path, status, amount, note in condensed]  # fmt: skip
        parts.append(escape(t("coverage_intro", lang)))
        parts.append(
            _longtable(
                [t("file", lang), t("status", lang), t("read", lang), t("reason", lang)],
                rows,
                "p{0.4\\linewidth}llp{0.25\\linewidth}",
            )
        )
        if left_out:
            parts.append(escape(t("more_files", lang, n=left_out)))
    return "\n\n".join(parts)


def _discussion(inp: WriterInput) -> str:
    """What the numbers are and what they can say: never the Results bullets again."""
    r, lang = inp.record, inp.lang
    if not r.assignment_requirements:
        parts = [escape(t("discussion_scope", lang))]
        kinds = [f for f in r.key_findings if "; read as " in f]
        if kinds:
            parts.append(escape(t("discussion_kinds", lang)) + "\n" + _itemize([_kind_of(f) for f in kinds]))
        return "\n\n".join(parts)
    open_requirements = {g.requirement for g in inp.gaps if g.kind == "requirement"}
    items = [
        f"{escape(req)} --- \\emph{{{t('not_addressed' if req in open_requirements else 'addressed', lang)}}}"
        for req in r.assignment_requirements
    ]
    return (
        escape(t("requirements_intro", lang))
        + "\n"
        + _itemize(items, escaped=True)
        + "\n\n"
        + escape(t("see_results", lang))
    )


def _kind_of(finding: str) -> str:
    """'a.csv: columns x, y; read as a time series (time in date).' -> 'a.csv: a time series (time in date).'"""
    path, _, rest = finding.partition(": columns ")
    return f"{path}: {rest.partition('; read as ')[2]}"


def _conclusion(inp: WriterInput) -> str:
    """The relations found (correlations, trends, peak widths), not the Results list again."""
    relations = [f for f in inp.record.facts if f.statistic in ("correlation", "slope", "trend_per_year", "fwhm")]
    findings = [fact_sentence(f) for f in relations[:4]] or [
        f for f in inp.record.key_findings if not f.startswith("Offline exploration by")
    ][:3]
    if not findings:
        return escape(t("no_findings", inp.lang))
    return escape(t("conclusion", inp.lang)) + "\n" + _itemize(findings)


SECTION_WRITERS: dict[str, Callable[[WriterInput], str]] = {
    "introduction": _introduction,
    "summary": _summary,
    "data": _data,
    "methods": _methods,
    "results": _results,
    "findings": _findings_with_tables,
    "discussion": _discussion,
    "limitations": _limitations,
    "gaps": _limitations,
    "conclusion": _conclusion,
}


# -- LaTeX pieces -----------------------------------------------------------------------------


def _itemize(items: list[str], *, escaped: bool = False) -> str:
    if not items:
        return ""
    lines = "\n".join(f"  \\item {item if escaped else escape(item)}" for item in items)
    return f"\\begin{{itemize}}\n{lines}\n\\end{{itemize}}"


def _table(header: list[str], rows: list[list[str]], spec: str) -> str:
    head = " & ".join(f"\\textbf{{{escape(h)}}}" for h in header)
    body = "\n".join(" & ".join(row) + r" \\" for row in rows)
    return (
        f"\\begin{{center}}\n\\begin{{tabular}}{{{spec}}}\n\\toprule\n{head} \\\\\n\\midrule\n"
        f"{body}\n\\bottomrule\n\\end{{tabular}}\n\\end{{center}}"
    )


def _longtable(header: list[str], rows: list[list[str]], spec: str, caption: str | None = None) -> str:
    head = " & ".join(f"\\textbf{{{escape(h)}}}" for h in header)
    body = "\n".join(" & ".join(row) + r" \\" for row in rows)
    cap = f"\\caption{{{caption}}}\\\\\n" if caption else ""
    return (
        f"{{\\small\n\\begin{{longtable}}{{{spec}}}\n{cap}\\toprule\n{head} \\\\\n\\midrule\n\\endhead\n"
        f"{body}\n\\bottomrule\n\\end{{longtable}}}}"
    )


def _stats_table(table: TableProfile, lang: Lang) -> str:
    rows = []
    for column, stats in table.numeric_summary.items():
        cells = [format_number(stats[s]) if s in stats else "--" for s in STAT_COLUMNS]
        unit = f" [{escape(table.units[column])}]" if column in table.units else ""
        rows.append([f"\\texttt{{{escape(column)}}}{unit}", *cells])
    caption = escape(t("stats_caption", lang, path=table.path, part=table.part or f"{table.rows} rows"))
    return _longtable([t("column", lang), *STAT_COLUMNS], rows, "l" + "r" * len(STAT_COLUMNS), caption)


def _figures(figures: list[FigureRecord]) -> str:
    blocks = []
    for figure in figures:
        blocks.append(
            "\\begin{figure}[H]\n\\centering\n"
            f"\\includegraphics[width=0.85\\linewidth]{{{figure.path}}}\n"
            f"\\caption{{{escape(figure.caption)}}}\n\\end{{figure}}"
        )
    return "\n\n".join(blocks)


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"
