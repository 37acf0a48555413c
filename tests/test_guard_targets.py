"""What a call asks about (guard/targets.py): the same target in other words, or a new one."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopwarden.guard.targets import same_target, systematic


def same(a: str, b: str) -> bool:
    return same_target({"q": a}, {"q": b})


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("git status", "git status --long"),
        ("git status", "git --no-pager status"),
        ("git status", "git -c color.ui=never status"),
        ("git status", "git -C . status"),
        ("build", "build-1"),
        ("build", "builds/1"),
        ("build", "b"),
        ("pump P-7 maintenance 2019", "P-7 maintenance report 2019"),
        ("Python 3.14 GIL changes", "PEP 779 python 3.14"),
        ("ping web-01", "ping web-01 -c 3"),
        ("Hi Bob, the meeting moved to 3pm.", "Bob - meeting moved to 3pm today."),
    ],
)
def test_other_words_for_one_question(a: str, b: str) -> None:
    assert same(a, b) and same(b, a)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("web-01", "web-02"),
        ("data/a.csv", "data/b.csv"),
        ("ping web-01", "ping web-02"),
        ("cat a.txt", "cat b.txt"),
        ("SELECT * FROM users WHERE id = 1", "SELECT * FROM users WHERE id = 2"),
        ("site:pypi.org kisfeed", "site:pypi.org etfmaster"),
        ("cd /srv/app && git status --short", "cd /srv/app && git stash list"),
        ("build", "dist"),
    ],
)
def test_a_new_target(a: str, b: str) -> None:
    assert not same(a, b) and not same(b, a)


def test_every_argument_must_name_the_same_thing() -> None:
    assert same_target({"path": "a.txt", "offset": 0}, {"path": "./a.txt", "offset": 0})
    assert not same_target({"path": "a.txt", "offset": 0}, {"path": "a.txt", "offset": 20})


def test_systematic_means_the_next_item_of_a_template() -> None:
    assert systematic({"path": "data/a.csv"}, {"path": "data/b.csv"})
    assert systematic({"page": 3}, {"page": 4})
    assert not systematic({"path": "build"}, {"path": "dist"})
    assert not systematic({"path": "a", "x": 1}, {"path": "b", "x": 2})


@given(st.dictionaries(st.sampled_from("abc"), st.text(max_size=20) | st.integers(), max_size=3))
def test_a_call_always_asks_what_it_asks(arguments: dict[str, object]) -> None:
    assert same_target(arguments, dict(arguments))
