"""The exploration phase: a guarded tool loop (or the offline explorer) over the data folder, its
tools and the findings computed from the data, ending in an `ExplorationRecord`."""
