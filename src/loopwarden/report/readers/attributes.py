"""Column names (and units) from a description file that lists a table's attributes in order.

Public dataset packages ship tables whose first row is metadata, not a header (scikit-learn's
"150,4,setosa,versicolor,virginica" over iris), next to a description that names the columns:
reStructuredText's ":Attribute Information:" list ("- sepal length in cm", ..., "- class:"), or a
Markdown/reStructuredText section headed "Attributes", "Columns", "Variables" or "Fields". When a
table has no header row and such a list in a description of the same folder has exactly as many
names as the table has columns, the names are used, their units kept, and the profile says where
they came from. A list of another length is never stretched to fit: the names stay generated and
the profile says why.

A description's "Summary Statistics" table (one row per numeric attribute, as scikit-learn's
breast cancer description has 30 where its attribute list has 10 base features) is the second
candidate, followed by the list's class entry when it has one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from ..record import Description, TableProfile
from .descriptions import UNIT_PATTERN
from .dialect import unique_names

DESCRIPTION_EXTS = frozenset({"rst", "md", "markdown", "txt"})
MAX_DESCRIPTION_BYTES = 256 * 1024
_FIELD = re.compile(r"^(\s*):([^:]+):\s*(.*)$")
_HEADING_WORDS = re.compile(r"^(?:attribute|column|variable|field)s?(?: information| description)?s?:?$", re.I)
_MD_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$")
_RULE = re.compile(r"^([=\-~^\"'`#*+])\1{2,}\s*$")
_ITEM = re.compile(r"^(\s*)(?:[-*+]|\d+[.)])\s+(.+?)\s*$")
_TABLE_BORDER = re.compile(r"^\s*=+(?:\s+=+)+\s*$")
_STAT_ROW = re.compile(r"^\s*([A-Za-z][^:]{0,80}?):\s+[-+]?\d")


@dataclass
class Naming:
    """What a description says about a table's columns."""

    source: str
    names: list[str] = field(default_factory=list)
    """The names to use (empty when no list fits the table's width)."""
    units: dict[str, str] = field(default_factory=dict)
    note: str = ""
    """One line for the profile: where the names came from, or why they were not used."""


Candidate = tuple[str, list[str], dict[str, str]]
"""(where in the file, column names, units by name)."""


def attribute_candidates(text: str) -> list[Candidate]:
    """Lists of column names (with units) a description gives, most direct first."""
    items = _listed_items(text)
    if not items:
        return []
    parsed = [_name_and_unit(item) for item in items]
    names = [n for n, _ in parsed]
    units = {n: u for n, u in parsed if u}
    candidates: list[Candidate] = [("attribute list", names, units)]
    stats = _summary_names(text)
    if stats and stats != names[: len(stats)]:
        tail = [n for n in names[-1:] if n.lower() in ("class", "target", "label")]
        candidates.append(("summary statistics table", stats + tail, {}))
    return candidates


def name_columns(width: int, documents: list[tuple[str, str]]) -> Naming | None:
    """The names for a headerless table of `width` columns from the first description (in the
    order given) whose list fits; a note of the mismatch when lists exist but none fits."""
    mismatch: Naming | None = None
    for path, text in documents:
        found = attribute_candidates(text)
        for where, names, units in found:
            if len(names) == width:
                unique = unique_names(names)
                kept = {unique[names.index(n)]: u for n, u in units.items()}
                note = f"no header row: column names from the {where} in {path}, in order"
                return Naming(source=path, names=unique, units=kept, note=note)
        if mismatch is None and found:
            counts = " or ".join(str(len(names)) for _, names, _ in found)
            note = f"{path} lists {counts} attributes but the table has {width} columns: names generated"
            mismatch = Naming(source=path, note=note)
    return mismatch


def related_descriptions(table: str, siblings: list[str]) -> list[str]:
    """Description files in the table's folder that may name its columns: the same stem first
    (iris.csv <- iris.rst, wine_data.csv <- wine.rst), then a README or DESCR file."""
    stem = _stem(table)
    texts = [s for s in siblings if PurePosixPath(s).suffix.lower().lstrip(".") in DESCRIPTION_EXTS]
    same = [s for s in texts if _stem(s) == stem]
    readme = [s for s in texts if PurePosixPath(s).stem.lower() in ("readme", "descr", "description") and s not in same]
    return sorted(same) + sorted(readme)


def _stem(path: str) -> str:
    name = PurePosixPath(path).stem.lower()
    return re.sub(r"(_data|_dataset|-data)$", "", name)


def _listed_items(text: str) -> list[str]:
    """The top-level items of the first attribute list: under an ":Attribute Information:" field
    or an "Attributes"/"Columns" heading, at the list's outermost indentation."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        start = _list_start(lines, i)
        if start is None:
            continue
        items = _items(lines[start:], field_indent=len(line) - len(line.lstrip()))
        if items:
            return items
    return []


def _list_start(lines: list[str], i: int) -> int | None:
    line = lines[i]
    found = _FIELD.match(line)
    if found and _HEADING_WORDS.match(found.group(2).strip()) and not found.group(3).strip():
        return i + 1
    heading = _MD_HEADING.match(line)
    if heading and _HEADING_WORDS.match(heading.group(1).strip()):
        return i + 1
    underlined = i + 1 < len(lines) and _RULE.match(lines[i + 1].strip()) and line.strip()
    if underlined and _HEADING_WORDS.match(line.strip()):
        return i + 2
    return None


def _items(lines: list[str], field_indent: int) -> list[str]:
    items: list[tuple[int, str]] = []
    for line in lines:
        stripped = line.strip()
        if not stripped:
            continue
        indent = len(line) - len(line.lstrip())
        if (_FIELD.match(line) and indent <= field_indent) or _MD_HEADING.match(line) or _RULE.match(stripped):
            break  # the next field or section
        item = _ITEM.match(line)
        if item:
            items.append((len(item.group(1)), item.group(2)))
    if not items:
        return []
    outer = min(indent for indent, _ in items)
    return [text for indent, text in items if indent == outer]


def _name_and_unit(item: str) -> tuple[str, str | None]:
    """("sepal length in cm") -> ("sepal length", "cm"); ("MedInc   median income") -> ("MedInc", None);
    ("class:") -> ("class", None); ("radius (mean of distances ...)") -> ("radius", None)."""
    text = item.strip().strip("`*").rstrip(":").strip()
    described = ""
    spaced = re.split(r"\s{2,}", text, maxsplit=1)
    if len(spaced) == 2:
        text, described = spaced
    elif re.search(r"\S:\s", text):
        text, _, described = text.partition(":")
    text = text.strip().strip("`*")
    unit = _unit(text)
    if unit is not None:
        return unit
    bracket = re.match(r"^(.+?)\s*\((.+)\)$", text)
    if bracket and not _unit_only(bracket.group(2)):
        text, described = bracket.group(1), bracket.group(2)
    elif bracket:
        return bracket.group(1).strip(), bracket.group(2).strip()
    described_unit = _unit(described.strip().rstrip(".")) if described else None
    return text.strip(), described_unit[1] if described_unit else None


def _unit(text: str) -> tuple[str, str] | None:
    found = UNIT_PATTERN.fullmatch(text)
    if found is None:
        return None
    return " ".join(found.group("quantity").strip(" ([").split()), found.group("unit")


def _unit_only(text: str) -> bool:
    return UNIT_PATTERN.fullmatch(f"x ({text})") is not None


def _summary_names(text: str) -> list[str]:
    """The row names of the first simple table after a "Summary Statistics" field."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if "summary statistics" in line.lower()), None)
    if start is None:
        return []
    names: list[str] = []
    borders = 0
    for line in lines[start + 1 :]:
        if _TABLE_BORDER.match(line):
            borders += 1
            if borders == 3:
                break
            continue
        if borders == 2:
            row = _STAT_ROW.match(line)
            if row:
                names.append(" ".join(row.group(1).split()))
    return names


def link_units(table: TableProfile, descriptions: list[Description]) -> TableProfile:
    """The table with the units its folder's descriptions state for its columns by name ("sepal
    length in cm" -> column "sepal length", "temp_max in °C" -> temp_max): from a description in
    its folder or above it, the same-stem one first; units the file itself states are kept."""
    home = table.path.split("#")[0].rpartition("/")[0]
    near = [d for d in descriptions if d.units and _covers(d.path, home)]
    near.sort(key=lambda d: (_stem(d.path) != _stem(table.path.split("#")[0]), -d.path.count("/")))
    by_name = {_key(c): c for c in table.columns if c not in table.units}
    linked: dict[str, str] = {}
    sources: list[str] = []
    for description in near:
        for quantity, unit in description.units.items():
            column = by_name.get(_key(quantity))
            if column is not None and column not in linked:
                linked[column] = unit
                sources += [description.path] if description.path not in sources else []
    if not linked:
        return table
    linked = {c: linked[c] for c in table.columns if c in linked}  # in the table's order
    note = f"units of {', '.join(linked)} as stated in {', '.join(sources)}"
    return table.model_copy(update={"units": {**table.units, **linked}, "notes": [*table.notes, note]})


def _covers(description: str, folder: str) -> bool:
    where = description.rpartition("/")[0]
    return not where or folder == where or folder.startswith(where + "/")


def _key(name: str) -> str:
    return " ".join(re.sub(r"[_\-.]+", " ", name).lower().split())


def class_labels(preamble: list[str], delimiter: str, columns: list[str], rows: int, codes: set[str]) -> dict[str, str]:
    """The names of a coded class column from a metadata first row of the form "rows, features,
    name_0, name_1, ..." (scikit-learn's "150,4,setosa,versicolor,virginica"), used only when
    everything it says checks out: the row count, one feature per column but the last, and the
    last column's values exactly the codes 0 .. len(names) - 1. {} otherwise."""
    if not preamble or not columns:
        return {}
    cells = [c.strip() for c in preamble[-1].split(delimiter)]
    if len(cells) < 4 or not all(c.isdigit() for c in cells[:2]):
        return {}
    names = cells[2:]
    if int(cells[0]) != rows or int(cells[1]) != len(columns) - 1:
        return {}
    if codes != {str(i) for i in range(len(names))} or any(not n or n.replace(".", "").isdigit() for n in names):
        return {}
    return {str(i): name for i, name in enumerate(names)}
