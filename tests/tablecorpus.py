"""A corpus of awkward tables made from public data shipped in PyPI packages.

Each case re-saves a real data set (palmerpenguins, vega_datasets, scikit-learn's bundled CSVs)
in one of the dialects people actually send: a metadata first row, space / semicolon / tab in a
`.csv`, comment lines, a units row, no header, decimal commas, quoted newlines, a BOM, Latin-1 and
mixed encodings. The expected column list and a few true figures come from the package's own
loader, never from the reader under test. Files are written into a folder given by the test
(nothing is committed).
"""

from __future__ import annotations

import csv
import io
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import pandas as pd

from describedcorpus import sklearn_datasets


@dataclass
class Case:
    name: str
    filename: str
    columns: list[str]
    """The column names the reader must report, in order."""
    delimiter: str
    header: bool = True
    """False: the file has no header row and the reader must generate names."""
    preamble: int = 0
    """Lines above the table (comments, a metadata row) the reader must skip and report."""
    decimal: str = "."
    units: dict[str, str] = field(default_factory=dict)
    rows: int = 0
    means: dict[str, float] = field(default_factory=dict)
    """column -> the mean of the source data (numbers the profile must reproduce)."""
    write: Callable[[Path], None] = lambda path: None
    source: str = ""


def generated(n: int) -> list[str]:
    from loopwarden.report.readers.dialect import generated_names

    return generated_names(n)


def _penguins() -> pd.DataFrame:
    from palmerpenguins import load_penguins

    frame: pd.DataFrame = load_penguins()
    return frame


def _weather() -> pd.DataFrame:
    from vega_datasets import local_data

    frame: pd.DataFrame = local_data.seattle_weather()
    frame["date"] = frame["date"].dt.strftime("%Y-%m-%d")
    return frame


def _sklearn_file(name: str) -> Path:
    return sklearn_datasets() / "data" / name


def _means(frame: pd.DataFrame) -> dict[str, float]:
    return {str(c): float(frame[c].mean()) for c in frame.select_dtypes("number").columns}


def _csv_text(frame: pd.DataFrame, **kwargs: Any) -> str:
    buffer = io.StringIO()
    frame.to_csv(buffer, index=False, lineterminator="\n", **kwargs)
    return buffer.getvalue()


def _sklearn_case(name: str, filename: str, loader: str) -> Case:
    import sklearn.datasets

    bunch = getattr(sklearn.datasets, loader)()
    n = len(bunch.feature_names) + 1  # the features and the target column
    data = pd.DataFrame(bunch.data)
    means = {generated(n)[i]: float(data[i].mean()) for i in range(data.shape[1])}
    return Case(
        name=name,
        filename=filename,
        columns=generated(n),
        delimiter=",",
        header=False,
        preamble=1,
        rows=len(bunch.data),
        means=means,
        write=lambda path: shutil.copyfile(_sklearn_file(filename), path),
        source=f"scikit-learn {filename} as shipped (first row: counts and class names)",
    )


def cases() -> list[Case]:
    penguins = _penguins()
    weather = _weather()
    p_cols = [str(c) for c in penguins.columns]
    w_cols = [str(c) for c in weather.columns]
    numeric_penguins = penguins.select_dtypes("number")
    out = [
        _sklearn_case("sklearn-wine", "wine_data.csv", "load_wine"),
        _sklearn_case("sklearn-iris", "iris.csv", "load_iris"),
        _sklearn_case("sklearn-breast-cancer", "breast_cancer.csv", "load_breast_cancer"),
    ]

    def space(path: Path) -> None:
        path.write_text(_csv_text(penguins, sep=" ", na_rep="NA"), encoding="utf-8")

    out.append(Case("penguins-space", "penguins_space.csv", p_cols, " ", rows=len(penguins),
                    means=_means(penguins), write=space, source="palmerpenguins, space-separated"))  # fmt: skip

    def semicolon(path: Path) -> None:
        path.write_text(_csv_text(penguins, sep=";"), encoding="utf-8")

    out.append(Case("penguins-semicolon", "penguins_semicolon.csv", p_cols, ";", rows=len(penguins),
                    means=_means(penguins), write=semicolon, source="palmerpenguins, semicolons"))  # fmt: skip

    def tab(path: Path) -> None:
        path.write_text(_csv_text(weather, sep="\t"), encoding="utf-8")

    out.append(Case("weather-tab-in-csv", "seattle_weather.csv", w_cols, "\t", rows=len(weather),
                    means=_means(weather), write=tab, source="seattle-weather, tabs in a .csv"))  # fmt: skip

    def comments(path: Path) -> None:
        head = "# Seattle weather, daily\n# source: vega_datasets\n# precipitation in mm, temperatures in C\n"
        path.write_text(head + _csv_text(weather), encoding="utf-8")

    out.append(Case("weather-comments", "weather_comments.csv", w_cols, ",", preamble=3, rows=len(weather),
                    means=_means(weather), write=comments, source="seattle-weather with # comment lines"))  # fmt: skip

    units = {"precipitation": "mm", "temp_max": "°C", "temp_min": "°C", "wind": "m/s"}

    def units_row(path: Path) -> None:
        text = _csv_text(weather)
        header, rest = text.split("\n", 1)
        row = ",".join(units.get(c, "") for c in w_cols)
        path.write_text(f"{header}\n{row}\n{rest}", encoding="utf-8")

    out.append(Case("weather-units-row", "weather_units.csv", w_cols, ",", units=units, rows=len(weather),
                    means=_means(weather), write=units_row, source="seattle-weather with a units row"))  # fmt: skip

    def units_bracketed(path: Path) -> None:
        text = _csv_text(penguins.select_dtypes("number"))
        header, rest = text.split("\n", 1)
        row = ",".join(f"[{u}]" for u in ("mm", "mm", "mm", "g", "year"))
        path.write_text(f"{header}\n{row}\n{rest}", encoding="utf-8")

    n_cols = [str(c) for c in numeric_penguins.columns]
    bracketed = dict(zip(n_cols, ("mm", "mm", "mm", "g", "year"), strict=True))
    out.append(Case("penguins-units-bracketed", "penguins_units.csv", n_cols, ",", units=bracketed,
                    rows=len(penguins), means=_means(numeric_penguins), write=units_bracketed,
                    source="palmerpenguins numeric columns, units row in brackets"))  # fmt: skip

    def headerless(path: Path) -> None:
        path.write_text(_csv_text(numeric_penguins.dropna(), header=False), encoding="utf-8")

    clean = numeric_penguins.dropna()
    out.append(Case("penguins-headerless", "measurements.csv", generated(clean.shape[1]), ",", header=False,
                    rows=len(clean), means={generated(5)[i]: float(clean.iloc[:, i].mean()) for i in range(5)},
                    write=headerless, source="palmerpenguins numeric columns without a header"))  # fmt: skip

    def decimal_comma(path: Path) -> None:
        path.write_text(_csv_text(penguins, sep=";", decimal=","), encoding="utf-8")

    out.append(Case("penguins-decimal-comma", "penguins_eu.csv", p_cols, ";", decimal=",", rows=len(penguins),
                    means=_means(penguins), write=decimal_comma, source="penguins, ; and decimal commas"))  # fmt: skip

    raw = pd.read_csv(resources.files("palmerpenguins") / "data" / "penguins-raw.csv")
    raw_cols = [str(c) for c in raw.columns]

    def quoted_newlines(path: Path) -> None:
        frame = raw.copy()
        frame["Comments"] = frame["Comments"].fillna("").str.replace(". ", ".\n", regex=False) + "\nchecked"
        path.write_text(_csv_text(frame, quoting=csv.QUOTE_NONNUMERIC), encoding="utf-8")

    out.append(Case("penguins-raw-quoted-newlines", "penguins_raw.csv", raw_cols, ",", rows=len(raw),
                    means=_means(raw), write=quoted_newlines,
                    source="palmerpenguins raw table, comments with embedded newlines"))  # fmt: skip

    def bom(path: Path) -> None:
        path.write_bytes(b"\xef\xbb\xbf" + _csv_text(weather).encode("utf-8"))

    out.append(Case("weather-bom", "weather_bom.csv", w_cols, ",", rows=len(weather), means=_means(weather),
                    write=bom, source="seattle-weather with a UTF-8 byte-order mark"))  # fmt: skip

    latin_cols = ["date", "precipitation (mm)", "temp_max (°C)", "temp_min (°C)", "wind (m/s)", "weather"]
    renamed = weather.set_axis(latin_cols, axis=1)

    def latin1(path: Path) -> None:
        path.write_bytes(_csv_text(renamed, sep=";").encode("cp1252"))

    out.append(Case("weather-latin1", "weather_latin1.csv", latin_cols, ";", rows=len(weather),
                    means=_means(renamed), write=latin1, source="seattle-weather in Windows-1252"))  # fmt: skip

    def mixed(path: Path) -> None:
        lines = _csv_text(renamed).splitlines(keepends=True)
        # The header in UTF-8, every 50th data row re-typed in Latin-1 by another program.
        body = b"".join(
            (line.replace("rain", "rain ±").encode("latin-1") if i % 50 == 0 else line.encode("utf-8"))
            for i, line in enumerate(lines[1:], 1)
        )
        path.write_bytes(lines[0].encode("utf-8") + body)

    out.append(Case("weather-mixed-encodings", "weather_mixed.csv", latin_cols, ",", rows=len(weather),
                    means=_means(renamed), write=mixed, source="UTF-8 header, some Latin-1 rows"))  # fmt: skip
    return out


def write_corpus(folder: Path) -> list[tuple[Case, Path]]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for case in cases():
        path = folder / case.filename
        case.write(path)
        written.append((case, path))
    return written
