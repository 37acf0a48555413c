"""What a call asks about: the same target in other words, or a new one.

Two calls of one tool ask about the same target when every argument does, where an argument
value is compared by what it names rather than how it is written:

- Equal values are the same. Numbers, lists and objects are otherwise different (an `offset`,
  a page, a cursor always names something new).
- An identifier (a string without spaces: a path, a host, a job id) is split into its
  alphanumeric parts. It is the same target when the parts are equal or one set holds the other
  (`build`, `build-1`, `build:latest`, `builds/1` and `b` all name the build job), and a new one
  when a part was substituted (`web-01` → `web-02`, `data/a.csv` → `data/b.csv`).
- Free text (a command, a search query) is split into words, leaving out flags and settings
  (`-s`, `--no-pager`, `--untracked-files=normal`, `color.ui=never`), small words ("the", "of") and punctuation. It is
  the same target when one's words hold the other's, or when only plain words differ and a
  quarter of the words are shared
  (`git status` / `git --no-pager status`; "pump P-7 maintenance 2019" / "P-7 maintenance report
  2019"; "PEP 779 python 3.14" / "python 3.14 GIL changes": other words for one question), and a
  new one when an identifier was substituted for another (`ping web-01` → `ping web-02`,
  `cat a.txt` → `cat b.txt`, `SELECT … id = 1` → `… id = 2`) or one word of an otherwise
  identical sequence was (`site:pypi.org kisfeed` → `site:pypi.org etfmaster`), or the words
  after a shared beginning have nothing in common (`git status` → `git stash list`).

`systematic` says whether a new target follows the previous one as a template does (a shared
prefix and suffix around the changed part: `data/a.csv` → `data/b.csv`, page 3 → page 4), which
is how sweeps enumerate, as opposed to guesses (`build`, `dist`, `tmp`, `.cache`).
"""

from __future__ import annotations

import re
from typing import Any

_PARTS = re.compile(r"[^\W_]+", re.UNICODE)
_STOPWORDS = frozenset(
    "a an the of in on at to for from by with and or is are was be it its this that as into about please".split()  # noqa: SIM905
)
_IDENTIFIER_MARKS = re.compile(r"[\d/.:_~@=#\\]")
_SETTING = re.compile(r"^[A-Za-z][\w.-]*=")  # `color.ui=never` after `-c`: how, not what


def _stem(part: str) -> str:
    return part[:-1] if len(part) > 3 and part.endswith("s") and part.isalpha() else part


def _parts(value: str) -> set[str]:
    return {_stem(p.lower()) for p in _PARTS.findall(value)}


def _word_list(text: str) -> list[str]:
    words = []
    for raw in text.split():
        if raw.startswith("-") or _SETTING.match(raw):
            continue  # a flag or a setting changes how a command answers, not what it asks about
        word = raw.strip("\"'`()[]{},;!?.:").lower()
        if word and word not in _STOPWORDS and _PARTS.search(word):
            words.append(_stem(word))
    return words


def _words(text: str) -> set[str]:
    return set(_word_list(text))


def _one_slot_changed(a: list[str], b: list[str]) -> bool:
    """The same words in the same order but one (`site:pypi.org kisfeed` / `... etfmaster`)."""
    return len(a) == len(b) > 1 and sum(x != y for x, y in zip(a, b, strict=True)) == 1


def _abbreviates(small: set[str], large: set[str]) -> bool:
    """Every part of `small` is in `large`, or (alphabetic parts) begins one of its parts."""
    return all(p in large or (p.isalpha() and any(q.startswith(p) for q in large)) for p in small)


def _same_identifier(a: str, b: str) -> bool:
    pa, pb = _parts(a), _parts(b)
    if not pa or not pb:
        return a.strip() == b.strip()
    return pa == pb or _abbreviates(pa, pb) or _abbreviates(pb, pa)


def _names(words: set[str]) -> bool:
    return any(_IDENTIFIER_MARKS.search(word) for word in words)


def _other_branch(a: list[str], b: list[str]) -> bool:
    """The same leading words, then nothing in common (`git status` / `git stash list`)."""
    prefix = 0
    while prefix < min(len(a), len(b)) and a[prefix] == b[prefix]:
        prefix += 1
    return prefix > 0 and not set(a[prefix:]) & set(b[prefix:])


def _same_text(a: str, b: str) -> bool:
    la, lb = _word_list(a), _word_list(b)
    wa, wb = set(la), set(lb)
    if wa <= wb or wb <= wa:
        return True  # one says more or less of the same (`ping web-01 -c 3`; a query without its year)
    if _one_slot_changed(la, lb) or _other_branch(la, lb):
        return False  # one slot filled differently, or a different subcommand: another target
    if _names(wa - wb) and _names(wb - wa):
        return False  # a name was substituted for another (`web-01` -> `web-02`): another target
    union = wa | wb
    return not union or len(wa & wb) * 4 >= len(union)  # other words for one question share some


def same_value(a: Any, b: Any) -> bool:
    if a == b:
        return True
    if not (isinstance(a, str) and isinstance(b, str)):
        return False
    if any(c.isspace() for c in a.strip()) or any(c.isspace() for c in b.strip()):
        return _same_text(a, b)
    return _same_identifier(a, b)


def same_target(a: Any, b: Any) -> bool:
    """Whether two calls' (validated) arguments ask about the same thing."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = set(a) | set(b)
        return all(same_value(a.get(k), b.get(k)) for k in keys)
    return same_value(a, b)


def systematic(previous: Any, current: Any) -> bool:
    """Whether `current` follows `previous` as the next item of an enumeration."""
    if not (isinstance(previous, dict) and isinstance(current, dict)) or set(previous) != set(current):
        return False
    changed = [k for k in current if previous[k] != current[k]]
    if len(changed) != 1:
        return False
    old, new = previous[changed[0]], current[changed[0]]
    if isinstance(old, int | float) and isinstance(new, int | float):
        return True
    if not (isinstance(old, str) and isinstance(new, str)):
        return False
    prefix = 0
    while prefix < min(len(old), len(new)) and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while suffix < min(len(old), len(new)) - prefix and old[-1 - suffix] == new[-1 - suffix]:
        suffix += 1
    return prefix + suffix >= 3
