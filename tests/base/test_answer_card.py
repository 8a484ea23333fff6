"""The answer card (issue 31): the numbers that answer a verb's question, with their 95 %
intervals and a trust mark, after the verdicts and alarms (the worst is still read first) and
before the rest of the table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cachelab.answers import CERTIFIED, INDICATIVE, TRUST, Answer, card_lines, with_card
from cachelab.servers import PrivateMemcached
from cards import invalid_load
from clitools import InProcess


def test_the_headline_then_the_card_then_what_to_trust_then_the_rest() -> None:
    card = [Answer("latency", "p50 1 ms (95 % 0.9–1.1 ms)", CERTIFIED),
            Answer("throughput", "10 replies/s", INDICATIVE, "client saturated")]
    text = "\n".join(["PARTIAL (interrupted after 1 s)", "  cut short: run 3",
                      "INVALID: not stationary → quiet it", "  also: late sends → as above",
                      "precision NOT reached in 2 s: p99 ±9 % (target ±5 %) → `--duration 8`",
                      "memcached 1.6 at x", "", "table", "note: few keys"])
    lines = with_card(text, card, ["few keys", "trace out of order"]).splitlines()
    # The worst first, with its own continuation line.
    assert lines[:2] == ["PARTIAL (interrupted after 1 s)", "  cut short: run 3"]
    assert lines[2] == "answer:"
    assert lines[3].split() == ["latency", "p50", "1", "ms", "(95", "%", "0.9–1.1", "ms)", "—",
                                "certified"]
    assert lines[4].endswith("— indicative (client saturated)")
    # Every other verdict, unchanged (each keeps its fix), and the warnings.
    assert lines[5:12] == ["what to trust:",
                           "  INVALID: not stationary → quiet it",
                           "    also: late sends → as above",
                           "  precision NOT reached in 2 s: p99 ±9 % (target ±5 %) → "
                           "`--duration 8`",
                           "  warning: few keys", "  warning: trace out of order", ""]
    # The rest, where a warning it closed with is not said twice.
    assert lines[12:] == ["memcached 1.6 at x", "", "table"]
    # Without alarms: the card, then the block of warnings, then the rest.
    plain = with_card("memcached 1.6 at x", card, ["few keys"]).splitlines()
    assert plain == ["answer:", *plain[1:3], "what to trust:", "  warning: few keys", "",
                     "memcached 1.6 at x"]
    # Without warnings nor other alarms there is no block; without answers the text is
    # unchanged, unless it has warnings to say.
    assert "what to trust:" not in with_card("INVALID: x → y\nrest", card)
    assert with_card("INVALID: x → y\nrest", card).splitlines()[:2] == ["INVALID: x → y",
                                                                        "answer:"]
    assert with_card(text, []) == text
    assert "  warning: few keys" in with_card(text, [], ["few keys"]).splitlines()
    assert card_lines([]) == []
    with pytest.raises(ValueError, match="trust must be one of"):
        Answer("x", "y", "sure")


def test_a_drill_s_news_never_heads_an_alarm() -> None:
    """A drill's membership changes lead its table, but the headline is the worst line: the
    verdict after them; a VALID run's DRILL line stays first."""
    card = [Answer("throughput", "10 replies/s", INDICATIVE, "INVALID")]
    text = "\n".join(["DRILL add m3 at 1 s: 1/3 of the keys moved", "  hit ratio 0.61 after",
                      "INVALID: not stationary → quiet it", "", "table"])
    lines = with_card(text, card).splitlines()
    assert lines[:2] == ["INVALID: not stationary → quiet it", "answer:"]
    assert lines[3:6] == ["what to trust:", "  DRILL add m3 at 1 s: 1/3 of the keys moved",
                          "    hit ratio 0.61 after"]
    valid = with_card("DRILL add m3 at 1 s\nVALID: every check passed\n\ntable", card)
    assert valid.splitlines()[:2] == ["DRILL add m3 at 1 s", "answer:"]


def _card(stdout: str) -> list[str]:
    lines = stdout.splitlines()
    start = lines.index("answer:")
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith("  "))
    return lines[start + 1:end]


def _mark(line: str) -> str:
    return line.rsplit(" — ", 1)[1]


def test_an_invalid_load_s_card_is_indicative_and_says_why(
        memcached: PrivateMemcached, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = invalid_load(InProcess(capsys), memcached.address, tmp_path / "out")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("INVALID: "), run.stdout  # the worst still first
    # its own "also:" lines, then the card, then what to trust: the verdicts said after the
    # figures (one request in flight cannot hold 200,000/s), each with its fix
    start = lines.index("answer:")
    assert all(line.startswith("  also: ") for line in lines[1:start]), run.stdout
    block = lines.index("what to trust:")
    assert block == start + 1 + len(_card(run.stdout)), run.stdout
    end = lines.index("", block)
    rate = next(line for line in lines[block + 1:end] if "NOT held" in line)
    assert rate.startswith("  target rate 200000/s NOT held: ") and " → " in rate, rate
    assert not any("NOT held" in line for line in lines[end:]), run.stdout  # said once
    card = _card(run.stdout)
    latency = next(line for line in card if line.strip().startswith("latency at 200,000/s"))
    assert re.search(r"p50 [\d.]+ (ns|µs|ms|s)", latency), latency
    assert _mark(latency).startswith(f"{INDICATIVE} (INVALID: "), latency
    assert all(_mark(line).split(" (")[0] in TRUST for line in card), card


def test_a_profile_with_its_intervals_is_certified(
        memcached: PrivateMemcached, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 2,000 samples: 20 beyond the p99, enough for its interval (and the p50's).
    run = InProcess(capsys)("profile", "--server", memcached.address, "--sizes", "100,1000",
                            "--keys", "1,10", "--multi-size", "100", "--samples", "2000",
                            "--warmup", "10", "--format", "table", "--no-plots",
                            "--out", tmp_path / "out")
    assert run.returncode == 0, run.stderr
    card = _card(run.stdout)
    for k in ("50", "99"):
        get = next(line for line in card if line.strip().startswith(f"get 1KB p{k} "))
        assert re.search(r"p\d+\s+[\d.]+ \S+ \(95 % [^)]+–[^)]+\)", get), get
        assert _mark(get) == CERTIFIED, get
    assert any(line.strip().startswith("set 1KB") for line in card), card
    per_key = next(line for line in card if "per extra key" in line)
    assert "1 key" in per_key and "10 keys" in per_key, per_key


def test_a_percentile_the_precision_did_not_aim_at_is_certified_only_within_the_target() -> None:
    """``--quick`` aims at the p50: a p99 whose interval is wider than the target is not
    certified by the p50's reaching it."""
    from types import SimpleNamespace

    from cachelab.profile.answers import profile_answers
    from cachelab.profile.cell import Cell

    get = Cell(op="get", value_size=1000, keys=1, samples=500, histogram="",
               percentiles={"50": 100_000, "99": 1_000_000},
               intervals={"50": [99_000, 101_000], "99": [500_000, 2_000_000]},
               precision={"half_width": 0.01, "reached": True})
    p = SimpleNamespace(precision={"target": 0.05, "percentile": "50", "cap_samples": 500},
                        cells_of=lambda op: [get] if op == "get" else [])
    card = {a.question: a for a in profile_answers(p)}
    assert card["get 1KB p50"].trust == CERTIFIED
    assert card["get 1KB p99"].trust == INDICATIVE
    assert card["get 1KB p99"].why == "p99 not the precision target: ±75 %"
