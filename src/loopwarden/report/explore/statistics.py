"""Statistics that fit the data's kind, each a `Fact` naming what it is, its file and column.

A table is one of: a time series (a date column, or year and month columns, or one column per
month), a categorical table (a column of a few classes), a measurement scan (readings against a
monotonic setting such as a position), or a plain table. Only what fits is computed: a time
series gets annual means and their spread, its yearly cycle and its trend per year — never a peak
width or a "per reading" uncertainty; a categorical table gets counts and means per class; only a
scan with one peak gets its full width at half maximum.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import pandas as pd

from ..readers.tables import correlations
from ..record import Fact, TableProfile

TableKind = Literal["time_series", "categorical", "scan", "table"]
MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DATE = (
    r"^(?:\d{4}[-/.]\d{1,2}(?:[-/.]\d{1,2})?|\d{1,2}[-/.]\d{1,2}[-/.]\d{4})"
    r"(?:[ T]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?)?(?:Z|[+-]\d{2}:?\d{2})?$"
)
MAX_CLASSES = 12
MAX_COLUMNS = 12
"""Columns given facts per table (a 30-column table keeps its statistics table, not 150 sentences)."""


def fmt(value: float) -> str:
    return f"{value:.4g}"


def numeric_columns(frame: pd.DataFrame) -> list[str]:
    return [str(c) for c in frame.select_dtypes("number").columns if frame[c].nunique() > 1]


def month_columns(frame: pd.DataFrame) -> list[str]:
    """Columns named after months (JAN..DEC, Jan, January): a wide monthly table."""
    return [str(c) for c in frame.columns if str(c).strip().lower()[:3] in MONTHS and len(str(c).strip()) <= 9]


def time_column(frame: pd.DataFrame, *, years: bool = True) -> str | None:
    """A column of dates or times (parsed), or (with `years`) a column of years."""
    for column in frame.columns:
        series = frame[column]
        if pd.api.types.is_datetime64_any_dtype(series):
            return str(column)
        if series.dtype == object or pd.api.types.is_string_dtype(series):
            sample = series.dropna().astype(str).head(50)
            if len(sample) >= 3 and sample.str.match(_DATE).all():
                return str(column)
    for column in frame.columns if years else []:
        if str(column).strip().lower() in ("year", "yr", "years") and pd.api.types.is_numeric_dtype(frame[column]):
            values = frame[column].dropna()
            if len(values) and values.between(1000, 3000).all():
                return str(column)
    return None


def class_column(frame: pd.DataFrame) -> str | None:
    """A column of a few classes: text with 2..12 distinct values, or a small-integer label."""
    rows = len(frame)
    for column in frame.columns:
        series = frame[column].dropna()
        distinct = series.nunique()
        text = series.dtype == object or pd.api.types.is_string_dtype(series)
        if text and 2 <= distinct <= MAX_CLASSES and distinct <= rows / 5:
            return str(column)
    for column in frame.columns:
        series = frame[column].dropna()
        name = str(column).lower()
        labelled = any(w in name for w in ("class", "target", "label", "species", "type", "group"))
        if labelled and pd.api.types.is_integer_dtype(series) and 2 <= series.nunique() <= MAX_CLASSES:
            return str(column)
    return None


def setting_column(frame: pd.DataFrame) -> str | None:
    """The setting a scan was measured against: a strictly monotonic numeric column."""
    for column in numeric_columns(frame):
        series = frame[column].dropna()
        if len(series) >= 5 and series.is_unique and (series.is_monotonic_increasing or series.is_monotonic_decreasing):
            return column
    return None


def table_kind(frame: pd.DataFrame) -> TableKind:
    """Dates or one column per month make a time series; then a column of classes a categorical
    table (penguins with a year column are classes observed over three years); then years."""
    if time_column(frame, years=False) is not None or len(month_columns(frame)) >= 6:
        return "time_series"
    if class_column(frame) is not None:
        return "categorical"
    if time_column(frame) is not None:
        return "time_series"
    if setting_column(frame) is not None and len(frame) >= 5:
        return "scan"
    return "table"


class StatisticsFailed(Exception):
    """A table's statistics could not be computed; the run goes on and says so."""


def checked_facts(path: str, frame: pd.DataFrame, profile: TableProfile | None = None) -> tuple[list[Fact], str | None]:
    """`table_facts`, never raising: on any error the table keeps only its row count and the
    second value says what failed (for the coverage ledger, the gaps and the summary)."""
    try:
        return table_facts(path, frame, profile), None
    except Exception as error:  # a hostile table must not end the run: it is reported instead
        rows = profile.rows if profile is not None else len(frame)
        over = profile.part if profile is not None and profile.part else f"all {len(frame)} rows"
        reason = f"{type(error).__name__}: {error}".splitlines()[0][:200]
        return [Fact(path=path, column="", statistic="rows", value=rows, over=over)], reason


def table_facts(path: str, frame: pd.DataFrame, profile: TableProfile | None = None) -> list[Fact]:
    """The facts of one table: its size, each numeric column's summary (over the part the profile
    covers), then what fits its kind. May raise on a hostile table: use `checked_facts`."""
    over = profile.part if profile is not None and profile.part else f"all {len(frame)} rows"
    rows = profile.rows if profile is not None else len(frame)
    facts = [Fact(path=path, column="", statistic="rows", value=rows, over=over)]
    kind = table_kind(frame)
    label = class_column(frame) if kind == "categorical" else None  # a class label has no mean
    columns = [c for c in numeric_columns(frame) if c not in (time_column(frame), label)][:MAX_COLUMNS]
    for column in columns:
        stats = profile.numeric_summary.get(column, {}) if profile is not None else {}
        series = frame[column].dropna()
        for statistic in ("mean", "std", "min", "max"):
            value = stats.get(statistic)
            if value is None:
                value = float(getattr(series, statistic)())
            if math.isfinite(value):
                facts.append(Fact(path=path, column=column, statistic=statistic, value=value, over=over))
    sample = f"first {len(frame)} rows" if profile is not None and len(frame) < profile.rows else over
    if kind != "scan":
        measured = [c for c in frame.columns if str(c) not in (time_column(frame), label)]
        for a, b, r in correlations(frame[measured], top=1):
            facts.append(Fact(path=path, column=a, other=b, statistic="correlation", value=r, over=sample))
    if kind == "time_series":
        facts += _time_series(path, frame, sample)
    elif kind == "categorical":
        facts += _categorical(path, frame, sample, profile.labels if profile is not None else {})
    elif kind == "scan":
        facts += _scan(path, frame, sample)
    return facts


def _time_series(path: str, frame: pd.DataFrame, over: str) -> list[Fact]:
    long = _monthly_long(frame)
    if long is None:
        return []
    facts: list[Fact] = []
    for column in [c for c in long.columns if c not in ("year", "month")][:MAX_COLUMNS]:
        pairs = long[["year", "month", column]].dropna()
        annual = pairs.groupby("year")[column].mean()
        if len(annual) >= 2:
            facts.append(Fact(path=path, column=column, statistic="std_of_annual_means",
                              value=float(annual.std()), over=over))  # fmt: skip
            slope = float(np.polyfit(annual.index.to_numpy(dtype=float), annual.to_numpy(dtype=float), 1)[0])
            facts.append(Fact(path=path, column=column, statistic="trend_per_year", value=slope, over=over))
        by_month = pairs.groupby("month")[column].mean()
        if pairs["year"].nunique() >= 2 and len(by_month) >= 6:
            high, low = int(by_month.idxmax()), int(by_month.idxmin())
            facts.append(Fact(path=path, column=column, statistic="monthly_mean", by=f"month={high}",
                              value=float(by_month[high]), over=over))  # fmt: skip
            facts.append(Fact(path=path, column=column, statistic="monthly_mean", by=f"month={low}",
                              value=float(by_month[low]), over=over))  # fmt: skip
    return facts


def _monthly_long(frame: pd.DataFrame) -> pd.DataFrame | None:
    """year, month and the numeric columns, one row per reading (a wide monthly table melted)."""
    months = month_columns(frame)
    if len(months) >= 6:
        year = time_column(frame)
        if year is None:
            return None
        name = f"{months[0]}..{months[-1]}"  # the monthly columns, named as the file names them
        melted = frame.melt(id_vars=[year], value_vars=months, var_name="month", value_name=name)
        melted["month"] = melted["month"].map(lambda m: MONTHS.index(str(m).strip().lower()[:3]) + 1)
        melted[name] = pd.to_numeric(melted[name], errors="coerce")
        return melted.rename(columns={year: "year"})
    column = time_column(frame)
    if column is None:
        return None
    numeric = [c for c in numeric_columns(frame) if c != column and c.lower() not in ("month", "year")]
    if str(column).lower() in ("year", "yr", "years"):
        month = next((str(c) for c in frame.columns if str(c).lower() in ("month", "mon", "mo")), None)
        out = pd.DataFrame({"year": frame[column], "month": _month_numbers(frame[month]) if month else 1})
    else:
        when = pd.to_datetime(frame[column], errors="coerce")
        out = pd.DataFrame({"year": when.dt.year, "month": when.dt.month})
    for c in numeric:
        out[c] = frame[c]
    return out.dropna(subset=["year", "month"])


def _month_numbers(series: pd.Series) -> pd.Series:
    """Months as 1..12 from numbers or names ("Jan", "January"); anything else is missing."""
    short = series.astype(str).str.strip().str.lower().str[:3]
    names = short.map(lambda m: MONTHS.index(m) + 1 if m in MONTHS else None)
    numbers = pd.to_numeric(series, errors="coerce")
    months = numbers.where(numbers.notna(), pd.to_numeric(names, errors="coerce"))
    return months.where(months.between(1, 12))


def _categorical(path: str, frame: pd.DataFrame, over: str, labels: dict[str, dict[str, str]]) -> list[Fact]:
    column = class_column(frame)
    assert column is not None
    names = labels.get(column, {})
    facts = []
    counts = frame[column].value_counts()
    for value, n in counts.items():
        facts.append(Fact(path=path, column=column, statistic="class_count", by=f"{column}={value}",
                          label=names.get(str(value)), value=float(n), over=over))  # fmt: skip
    for numeric in [c for c in numeric_columns(frame) if c != column][:4]:
        means = frame.groupby(column)[numeric].mean()
        for value, mean in means.items():
            if math.isfinite(float(mean)):
                facts.append(Fact(path=path, column=numeric, statistic="class_mean", by=f"{column}={value}",
                                  label=names.get(str(value)), value=float(mean), over=over))  # fmt: skip
    return facts


def _scan(path: str, frame: pd.DataFrame, over: str) -> list[Fact]:
    x = setting_column(frame)
    assert x is not None
    facts = []
    for y in [c for c in numeric_columns(frame) if c != x][:MAX_COLUMNS]:
        pair = frame[[x, y]].dropna()
        if len(pair) < 5:
            continue
        xs, ys = pair[x].to_numpy(dtype=float), pair[y].to_numpy(dtype=float)
        if np.std(xs) > 0 and np.std(ys) > 0:
            r = float(np.corrcoef(xs, ys)[0, 1])
            facts.append(Fact(path=path, column=y, other=x, statistic="correlation", value=r, over=over))
            if abs(r) >= 0.9:
                slope = float(np.polyfit(xs, ys, 1)[0])
                facts.append(Fact(path=path, column=y, other=x, statistic="slope", value=slope, over=over))
        scatter = _scatter(ys)
        if scatter is not None:
            facts.append(Fact(path=path, column=y, other=x, statistic="scatter", value=scatter, over=over))
        width = _single_peak_width(xs, ys)
        if width is not None:
            peak = int(np.argmax(ys))
            facts.append(Fact(path=path, column=y, other=x, statistic="peak", value=float(ys[peak]), over=over))
            facts.append(Fact(path=path, column=x, other=y, statistic="peak_position", value=float(xs[peak]),
                              over=over))  # fmt: skip
            facts.append(Fact(path=path, column=y, other=x, statistic="fwhm", value=width, over=over))
    return facts


def _scatter(ys: np.ndarray) -> float | None:
    """Point-to-point scatter of a smooth scan from fourth differences, which cancel its trend
    and curvature (var of a 4th difference of white noise = 70 sigma^2); MAD for robustness."""
    if len(ys) < 10:
        return None
    fourth = np.diff(ys, 4)
    mad = float(np.median(np.abs(fourth - np.median(fourth))))
    scatter = 1.4826 * mad / math.sqrt(70)
    return scatter if scatter > 0 else None


def _single_peak_width(xs: np.ndarray, ys: np.ndarray) -> float | None:
    """Full width at half maximum of a profile with exactly one peak above half its maximum
    (and a baseline below it at both ends); None for anything else, such as a repeating cycle."""
    peak = int(np.argmax(ys))
    if not 0 < peak < len(ys) - 1 or ys[peak] <= 0:
        return None
    half = ys[peak] / 2
    above = ys > half
    if above[0] or above[-1] or int(np.count_nonzero(np.diff(above.astype(int)) == 1)) != 1:
        return None
    left = next(i for i in range(peak, 0, -1) if ys[i - 1] <= half < ys[i])
    right = next(i for i in range(peak, len(ys) - 1) if ys[i + 1] <= half < ys[i])
    x_left = xs[left - 1] + (half - ys[left - 1]) * (xs[left] - xs[left - 1]) / (ys[left] - ys[left - 1])
    x_right = xs[right] + (ys[right] - half) * (xs[right + 1] - xs[right]) / (ys[right] - ys[right + 1])
    return float(abs(x_right - x_left))


_NAMES = {
    "mean": "mean of {column}",
    "std": "standard deviation of {column}",
    "min": "minimum of {column}",
    "max": "maximum of {column}",
    "std_of_annual_means": "standard deviation of the annual means of {column} (year-to-year variation)",
    "trend_per_year": "linear trend of the annual means of {column}, per year",
    "monthly_mean": "mean of {column} in {by} over all years",
    "class_count": "rows with {by}",
    "class_mean": "mean of {column} for {by}",
    "correlation": "correlation (Pearson r) of {column} with {other}",
    "slope": "slope of a straight-line fit of {column} against {other}",
    "peak": "peak of {column} against {other}",
    "peak_position": "{column} at the peak of {other}",
    "fwhm": "full width at half maximum of the {column} peak, in units of {other}",
    "scatter": "point-to-point scatter (noise) of {column} along {other} (robust estimate from fourth differences)",
}


def fact_sentence(fact: Fact) -> str:
    """What the number is, its value, file and column: "standard deviation of temp in a.csv: 1.2"."""
    if fact.statistic == "rows":
        return f"{fact.path}: {int(fact.value)} rows ({fact.over})."
    by = fact.by or ""
    if by.startswith("month="):
        by = MONTHS[int(by.split("=")[1]) - 1].title()
    elif fact.label:
        by = f"{by} ({fact.label})"
    name = _NAMES.get(fact.statistic, fact.statistic + " of {column}").format(
        column=fact.column, other=fact.other or "", by=by
    )
    value = f"{fact.value:+.3f}" if fact.statistic == "correlation" else fmt(fact.value)
    if fact.statistic == "class_count":
        value = str(int(fact.value))
    return f"{fact.path}: {name} = {value}."


def column_sentences(facts: list[Fact]) -> list[str]:
    """One sentence per column for the summary statistics (mean, std, min, max named), then one
    per other fact."""
    out: list[str] = []
    summary: dict[tuple[str, str], dict[str, Fact]] = {}
    for fact in facts:
        if fact.statistic in ("mean", "std", "min", "max"):
            summary.setdefault((fact.path, fact.column), {})[fact.statistic] = fact
    done: set[tuple[str, str]] = set()
    for fact in facts:
        key = (fact.path, fact.column)
        if fact.statistic in ("mean", "std", "min", "max"):
            if key in done:
                continue
            done.add(key)
            parts = summary[key]
            named = ", ".join(f"{_WORD[s]} {fmt(parts[s].value)}" for s in ("mean", "std", "min", "max") if s in parts)
            out.append(f"{fact.path}, column {fact.column} ({fact.over}): {named}.")
        else:
            out.append(fact_sentence(fact))
    return out


_WORD = {"mean": "mean", "std": "standard deviation", "min": "minimum", "max": "maximum"}
