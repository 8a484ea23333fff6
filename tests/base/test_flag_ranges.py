"""Numeric flags out of range say the range (issue 16: ``--samples 99999999999999999999`` said
``field "samples" has the wrong type``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clitools import InProcess, one_error_line


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["profile", "--samples", "99999999999999999999"],
         "argument --samples: must be an integer from 1 to 10000000, got 99999999999999999999"),
        (["profile", "--samples", "1.5"], "argument --samples: must be an integer from 1 to"),
        (["profile", "--timeout", "0"], "argument --timeout: must be a number above 0 and at"),
        (["load", "--duration", "nan"], "argument --duration: must be a number above 0"),
        (["load", "--stall-ms", "-5"], "argument --stall-ms: must be a number above 0"),
        (["load", "--give-up", "0"], "argument --give-up: must be a number above 0"),
        (["load", "--seed", "-1"],
         "argument --seed: must be an integer from 0 to 18446744073709551615, got -1"),
        (["simulate", "t.jsonl", "--draws", "0"], "argument --draws: must be an integer from 1"),
        (["replay", "t.jsonl", "--slices", "1000"],
         "argument --slices: must be an integer from 1 to 100, got 1000"),
        (["tiers", "--reads", "0"], "argument --reads: must be an integer from 1"),
        (["profile", "--server-memory", "0"], "argument --server-memory: must be an integer"),
    ],
)
def test_out_of_range_numbers_say_the_range(
        cli: InProcess, argv: list[str], words: str, tmp_path: Path) -> None:
    p = cli(*argv, cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert words in one_error_line(p)
    assert list(tmp_path.iterdir()) == []
