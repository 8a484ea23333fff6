"""An interrupted or abandoned profile says PARTIAL, with the samples its cells really hold,
in its table, over every table, and in ``--show`` — never the samples that were asked for."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import cachelab.profile as profiles
from cachelab.cli import run as cli
from cachelab.errors import Interrupted
from cachelab.profile.pool import profile_pool
from cachelab.servers import PrivateMemcached
from cards import without_card
from partial_runs import interrupted_profile, sigint_when_busy

TABLES = ("Get latency by value size", "Set latency by value size",
          "Multi-get latency by key count")


def counts_text(doc: dict) -> str:
    """The cells' real sample counts as the table must show them, from the saved JSON."""
    kept = sorted(c["samples"] for c in doc["cells"])
    lo, hi = kept[0], kept[-1]
    return f"{lo:,}" if lo == hi else f"{lo:,}\u2013{hi:,}"


def assert_says_partial(text: str, doc: dict, asked: int, why: str) -> None:
    # (the answer card, after the PARTIAL line, says it too: tests/base/test_answer_card.py)
    lines = without_card(text).splitlines()
    first = lines[0]
    assert first.startswith(f"PARTIAL ({why} after "), first
    assert f"samples per cell: {counts_text(doc)} of {asked:,} asked)" in first, first
    # The heading under it gives the real counts too, not the asked-for number.
    assert f"samples per cell: {counts_text(doc)} of {asked:,} asked" in lines[1], lines[1]
    assert f"{asked} samples per cell" not in text
    titles = [line for line in lines if any(t in line for t in TABLES)]
    assert len(titles) == 3 and all(t.startswith("PARTIAL: ") for t in titles), titles


@pytest.mark.slow
def test_ctrl_c_table_says_partial_with_the_real_counts(memcached: PrivateMemcached,
                                                        tmp_path: Path) -> None:
    out = tmp_path / "p"
    p = sigint_when_busy(["profile", "--server", memcached.address, "--samples", "1000000",
                          "--warmup", "0", "--sizes", "1,1K", "--keys", "1,10", "--no-plots",
                          "--format", "table", "--out", out], memcached.address, cwd=tmp_path)
    assert p.returncode == 130, p.stderr
    doc = json.loads((out / "profile.json").read_text())
    assert doc["run"]["cancelled"] is True
    assert all(0 < c["samples"] < 1_000_000 for c in doc["cells"])
    assert_says_partial(p.stdout, doc, 1_000_000, "interrupted")


def test_show_of_a_partial_profile_says_so(memcached: PrivateMemcached, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    doc = interrupted_profile(memcached.address, tmp_path / "p")
    assert cli(["profile", "--show", str(tmp_path / "p"), "--format", "table"]) == 0
    shown = capsys.readouterr().out
    assert_says_partial(shown, doc, 1_000_000, "interrupted")
    elapsed = re.search(r"interrupted after ([\d.]+) (m?s)", shown.splitlines()[0])
    assert elapsed, shown.splitlines()[0]
    seconds = float(elapsed[1]) / (1000 if elapsed[2] == "ms" else 1)
    assert seconds == pytest.approx(doc["run"]["elapsed_s"], rel=0.01)


def test_a_complete_profile_says_nothing_of_the_kind(memcached: PrivateMemcached,
                                                     capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path) -> None:
    code = cli(["profile", "--server", memcached.address, "--samples", "50", "--warmup", "0",
                "--sizes", "1", "--keys", "1", "--no-plots", "--format", "table", "--out",
                str(tmp_path / "p")])
    assert code == 0
    text = capsys.readouterr().out
    assert "PARTIAL" not in text
    # The answer card first, then the heading.
    assert text.splitlines()[0] == "answer:"
    assert "50 samples per cell after 0 warm-up" in without_card(text).splitlines()[0]


def test_a_profile_whose_server_went_away_says_it_gave_up(
        fresh_memcached: PrivateMemcached) -> None:
    def stop_the_server(done: int, _total: int) -> None:
        if done >= 300 and fresh_memcached.running:
            fresh_memcached.stop()

    spec = profiles.ProfileSpec(samples=1_000_000, warmup=0, sizes=(1,), key_counts=(1,),
                                timeout=0.2, connect_timeout=0.2, give_up_after=0.5)
    result = profiles.profile(spec, server=fresh_memcached.address, on_progress=stop_the_server)
    doc = result.to_dict()
    assert doc["run"]["aborted"], doc["run"]
    text = result.render()
    assert_says_partial(text, doc, 1_000_000, "gave up")
    reason = doc["run"]["aborted"].removeprefix("gave up: ")
    assert f": {reason}; samples per cell" in text.splitlines()[0]


def test_a_pool_profile_cut_short_keeps_what_its_members_measured(
        memcached: PrivateMemcached, fresh_memcached: PrivateMemcached) -> None:
    def stop_after_the_first(done: int, _total: int) -> None:
        if done == 1:
            raise KeyboardInterrupt

    spec = profiles.ProfileSpec(samples=200, warmup=0, sizes=(1,), key_counts=(1,))
    members = [memcached.address, fresh_memcached.address]
    try:
        profile_pool(spec, members, rounds=2, on_progress=stop_after_the_first)
    except Interrupted as e:
        pool = e.partial
    except KeyboardInterrupt:
        pytest.fail("the Ctrl-C went through: nothing was kept")
    else:
        pytest.fail("the pool profile was not interrupted")
    first, second = pool.members
    assert {c.samples for c in first.cells} == {100}      # its first round of two
    assert {c.samples for c in second.cells} == {0}       # never reached
    assert pool.pool == [] and pool.run["cancelled"] is True
    head = pool.render().splitlines()[0]
    assert head.startswith("PARTIAL (interrupted after "), head
    assert head.endswith(f"; samples per cell: {members[0]} 100 of 200 asked; {members[1]} 0 "
                         "of 200 asked)"), head


def test_a_pool_member_gone_in_a_later_round_keeps_the_rounds_done(
        memcached: PrivateMemcached, fresh_memcached: PrivateMemcached) -> None:
    def kill_the_second(done: int, _total: int) -> None:
        if done == 2:  # round 2 starts with the second member (the order rotates)
            fresh_memcached.stop()

    spec = profiles.ProfileSpec(samples=200, warmup=0, sizes=(1,), key_counts=(1,),
                                connect_timeout=0.5, timeout=0.5, give_up_after=0.5)
    members = [memcached.address, fresh_memcached.address]
    pool = profile_pool(spec, members, rounds=2, on_progress=kill_the_second)
    assert pool.run["aborted"].startswith(f"{members[1]}: "), pool.run
    # Each member keeps its first round; the pool stopped when the second was gone.
    assert [{c.samples for c in m.cells} for m in pool.members] == [{100}, {100}]
    assert pool.pool and pool.pool[0]["samples"] == 200
    assert pool.render().splitlines()[0].startswith("PARTIAL (gave up after ")


@pytest.mark.slow
def test_ctrl_c_on_a_pool_profile_writes_it(memcached: PrivateMemcached,
                                            fresh_memcached: PrivateMemcached,
                                            tmp_path: Path) -> None:
    out = tmp_path / "pool"
    p = sigint_when_busy(["profile", "--server", memcached.address, "--server",
                          fresh_memcached.address, "--samples", "1000000", "--warmup", "0",
                          "--sizes", "1", "--keys", "1", "--no-plots", "--format", "table",
                          "--out", out], memcached.address, cwd=tmp_path)
    assert p.returncode == 130, p.stderr
    assert p.stderr.splitlines() == [f"cachelab: error: interrupted; partial results saved in "
                                     f"{out}"]
    assert p.stdout.startswith("PARTIAL (interrupted after "), p.stdout
    doc = json.loads((out / "profile-pool.json").read_text())
    assert [m["address"] for m in doc["members"]] == [memcached.address,
                                                      fresh_memcached.address]
    first = json.loads((out / doc["members"][0]["profile"] / "profile.json").read_text())
    assert first["run"]["cancelled"] is True and first["cells"][0]["samples"] > 0
