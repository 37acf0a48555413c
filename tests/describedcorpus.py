"""Folders of real public data WITH their own descriptions, built at test time from installed
packages (nothing is committed, nothing is downloaded):

- scikit-learn: sklearn/datasets/data/*.csv as shipped (a metadata first row) next to
  sklearn/datasets/descr/*.rst (the dataset's own description: title, prose, units);
- palmerpenguins: data/penguins.csv next to the package's penguins.py (its loader's docstring);
- vega_datasets: seattle-weather.csv with a README.md holding the package's own description of
  it, and the same data as a wide monthly table (one row per year, one column per month: a
  cyclic series, the case that once got a "full width at half maximum").

`raw_frames` reads a folder's tables back with plain pandas, for tests that recompute numbers.
"""

from __future__ import annotations

import shutil
from importlib import resources
from importlib.util import find_spec
from pathlib import Path

import pandas as pd

SKLEARN = {"iris": "iris.csv", "wine_data": "wine_data.csv", "breast_cancer": "breast_cancer.csv"}
"""description stem -> shipped data file (both named by scikit-learn)."""
_CANCER = ("radius", "texture", "perimeter", "area", "smoothness", "compactness", "concavity", "concave points",
           "symmetry", "fractal dimension")  # fmt: skip
EXPECTED_COLUMNS = {
    "iris.csv": ["sepal length", "sepal width", "petal length", "petal width", "class"],
    "wine_data.csv": [
        "Alcohol",
        "Malic acid",
        "Ash",
        "Alcalinity of ash",
        "Magnesium",
        "Total phenols",
        "Flavanoids",
        "Nonflavanoid phenols",
        "Proanthocyanins",
        "Color intensity",
        "Hue",
        "OD280/OD315 of diluted wines",
        "Proline",
        "class",
    ],
    "breast_cancer.csv": [f"{n} ({part})" for part in ("mean", "standard error", "worst") for n in _CANCER] + ["class"],
}
"""The columns of each shipped file as its .rst names them (its first row is metadata, not a header):
iris and wine from the ':Attribute Information:' list, breast cancer from its summary statistics
table (the list gives 10 base features for 30 columns)."""
MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")


def sklearn_datasets() -> Path:
    """scikit-learn's datasets folder (its shipped CSVs in data/, descriptions in descr/), found
    without importing it: `resources.files("sklearn.datasets")` imports the package, ~2 s of CPU in
    each xdist worker that only copies a file from it."""
    spec = find_spec("sklearn")
    assert spec is not None and spec.submodule_search_locations, "scikit-learn is not installed"
    return Path(next(iter(spec.submodule_search_locations))) / "datasets"


def _sklearn(kind: str, name: str) -> Path:
    return sklearn_datasets() / kind / name


def sklearn_folder(root: Path, names: tuple[str, ...] = ("iris", "wine_data")) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for stem in names:
        shutil.copyfile(_sklearn("data", SKLEARN[stem]), root / SKLEARN[stem])
        shutil.copyfile(_sklearn("descr", f"{stem}.rst"), root / f"{stem}.rst")
    return root


def penguins_folder(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    package = resources.files("palmerpenguins")
    shutil.copyfile(str(package / "data" / "penguins.csv"), root / "penguins.csv")
    shutil.copyfile(str(package / "penguins.py"), root / "penguins.py")
    return root


def weather_folder(root: Path, *, wide: bool = True) -> Path:
    from vega_datasets import data

    root.mkdir(parents=True, exist_ok=True)
    dataset = data.seattle_weather
    shutil.copyfile(str(resources.files("vega_datasets") / "_data" / dataset.filename), root / dataset.filename)
    (root / "README.md").write_text(f"# {dataset.name}\n\n{dataset.description}\n", encoding="utf-8")
    if wide:
        daily = pd.read_csv(root / dataset.filename, parse_dates=["date"])
        monthly = daily.groupby([daily["date"].dt.year, daily["date"].dt.month])["temp_max"].mean().unstack()
        monthly.columns = list(MONTHS)
        monthly.index.name = "year"
        monthly.round(3).to_csv(root / "temp_max_monthly.csv")
    return root


def raw_frames(root: Path) -> dict[str, pd.DataFrame]:
    """Every table of a corpus folder read with plain pandas, by relative path (the scikit-learn
    files with their metadata row skipped and the names their .rst gives, EXPECTED_COLUMNS)."""
    frames: dict[str, pd.DataFrame] = {}
    for path in sorted(root.rglob("*.csv")):
        rel = path.relative_to(root).as_posix()
        if path.name in SKLEARN.values():
            frame = pd.read_csv(path, skiprows=1, header=None)
            frame.columns = EXPECTED_COLUMNS[path.name]
        else:
            frame = pd.read_csv(path)
        frames[rel] = frame
    return frames
