"""The writing phase: from the exploration record to a compiled report (draft, reflection, the
offline writer, bibliography, gap check, LaTeX, Markdown and the xelatex build)."""
