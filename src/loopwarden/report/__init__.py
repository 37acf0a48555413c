"""The report agent: point it at an unknown data folder and it works out what experiment this
is (exploration), then writes the report (writing). It uses the runtime; the runtime never
imports it.

Exploration lives in `scan` (zero-LLM listing), `paths` (the path guard), `readers`, `tools`,
`sandbox` (figures), `coverage`, `explore` and `offline` (the offline explorer model).
"""

from .record import CoverageEntry, CoverageLedger, ExplorationRecord, FigureRecord, TableProfile

__all__ = ["CoverageEntry", "CoverageLedger", "ExplorationRecord", "FigureRecord", "TableProfile"]
