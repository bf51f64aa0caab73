"""Python envs (``gym:ID``, ``py:MODULE:CALLABLE``) in rollout's vector
engine: the names, and keyword arguments as the env worker reads them
(docs/env-api.md "Python envs").

The engine runs such envs in env worker processes of this interpreter
(``sys.executable``, unless ``ROLLOUT_PYTHON`` names another), one per thread
it would use: ``num_threads`` sets how many.
"""
from __future__ import annotations

import ast
import os
import sys
from typing import Any, Mapping

PREFIXES = ("gym:", "py:")


def is_python_env(name: str) -> bool:
    """Whether name is a Python env's (gym:ID or py:MODULE:CALLABLE)."""
    return name.startswith(PREFIXES)


def python_env_args(kwargs: Mapping[str, Any]) -> list[tuple[str, str]]:
    """kwargs as (key, Python literal) pairs: the worker reads each value back
    with ast.literal_eval, so it gets the same number, string, bool, None,
    tuple... A value that is not a literal is refused by name. Also makes the
    workers run on this interpreter and import this package (its compiled
    part runs their loop): an installed one, not the source tree it was
    built from."""
    os.environ.setdefault("ROLLOUT_PYTHON", sys.executable)
    os.environ.setdefault("ROLLOUT_PYTHONPATH",
                          os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = []
    for key, value in kwargs.items():
        text = repr(value)
        try:
            same = ast.literal_eval(text) == value
        except (ValueError, SyntaxError):
            same = False
        if not same:
            raise TypeError(f"env argument {key}={value!r}: a Python env takes literals only "
                            "(numbers, strings, bools, None, tuples, lists, dicts of them)")
        out.append((key, text))
    return out
