"""scale through a real twemproxy in front of real memcached servers: every point is a load
run through the proxy, each run records what the servers behind it counted, and every key
written is deleted."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from cachelab import _core
from cachelab.proxies import PrivateTwemproxy, find_nutcracker
from cachelab.report import render_report
from cachelab.scale import ScaleResult, ScaleSpec, scale
from cachelab.servers import PrivateMemcached
from clitools import InProcess, one_error_line
from pools import loopback_pool, unused_address

try:
    find_nutcracker()
except Exception as e:  # noqa: BLE001 - the reason is shown in the skip
    pytest.skip(f"no twemproxy: {e}", allow_module_level=True)

#: A short sweep: two points, one run each, 0.8 s a run.
SHORT = ["--points", "1,2", "--repeats", "1", "--warmup", "0.2", "--settle", "0.2",
         "--window", "0.4", "--interval", "0.1", "--bootstrap", "0", "--key-space", "1000"]


@pytest.fixture(scope="module")
def pool() -> Iterator[tuple[list[PrivateMemcached], PrivateTwemproxy]]:
    with loopback_pool() as members, PrivateTwemproxy(
            [m.address for m in members], distribution="ketama", hash="md5") as proxy:
        yield members, proxy


def _counters(members: list[PrivateMemcached]) -> list[dict[str, int]]:
    out = []
    for m in members:
        with _core.Client(m.address) as c:
            stats = c.stats()
        out.append({k: int(stats[k]) for k in ("cmd_get", "curr_items")})
    return out


def _flags(members: list[PrivateMemcached]) -> list[str]:
    return [x for m in members for x in ("--server", m.address)]


def test_each_point_runs_through_the_proxy_and_records_the_servers_behind(
        pool: tuple[list[PrivateMemcached], PrivateTwemproxy]) -> None:
    members, proxy = pool
    addresses = [m.address for m in members]
    spec = ScaleSpec(points=[1, 2], repeats=1, warmup=0.2, settle=0.2, window=0.4,
                     interval=0.1, bootstrap=0,
                     workload={"key_space": 2000, "mix": {"get": 0.8, "set": 0.2}})
    before = _counters(members)
    r = scale(spec, server=proxy.address, behind=addresses)
    after = _counters(members)
    assert r.server["proxy"] and r.server["address"] == proxy.address
    assert r.server["behind"] == addresses
    assert len(r.runs) == 2
    for run in r.runs:
        assert run["errors"] == 0 and run["lost"] == 0 and run["throughput"] > 0
        assert [b["address"] for b in run["behind"]] == addresses
        gets = [b["deltas"]["cmd_get"] for b in run["behind"]]
        sets = [b["deltas"]["cmd_set"] for b in run["behind"]]
        # Every get and set of the run reached one server behind the proxy, each its share.
        assert sum(gets) == run["ops"]["get"] and sum(sets) == run["ops"]["set"]
        assert all(g > 0.15 * sum(gets) for g in gets)
    # Counted by the servers themselves: every get of the sweep (prefill and clean-up read
    # nothing), and no key left behind on any of them.
    assert sum(a["cmd_get"] - b["cmd_get"] for a, b in zip(after, before)) == \
        sum(run["ops"]["get"] for run in r.runs)
    assert [a["curr_items"] for a in after] == [b["curr_items"] for b in before]
    text = r.render()
    assert f"through the proxy at {proxy.address}" in text and "behind the proxy" in text


def test_the_cli_sweeps_through_the_proxy_and_writes_its_artifacts(
        cli: InProcess, pool: tuple[list[PrivateMemcached], PrivateTwemproxy],
        tmp_path: Path) -> None:
    members, proxy = pool
    before = _counters(members)
    out = tmp_path / "s"
    p = cli("scale", "--proxy", proxy.address, *_flags(members), *SHORT, "--no-plots",
            "--format", "json", "--out", out)
    assert p.returncode == 0, p.stderr
    d = json.loads((out / "scale.json").read_text())
    assert d == json.loads(p.stdout)
    assert d["server"]["proxy"] is True and len(d["runs"]) == 2
    assert all(len(run["behind"]) == 3 for run in d["runs"])
    assert (out / "scale.csv").exists()
    after = _counters(members)
    assert [a["curr_items"] for a in after] == [b["curr_items"] for b in before]


def test_the_cli_refuses_what_cannot_go_through_the_proxy(
        cli: InProcess, pool: tuple[list[PrivateMemcached], PrivateTwemproxy],
        tmp_path: Path) -> None:
    members, proxy = pool
    flags = ["--proxy", proxy.address, *_flags(members), *SHORT, "--out", tmp_path]
    threads = cli("scale", *flags, "--vary", "server-threads")
    assert threads.returncode == 2 and "server-threads" in one_error_line(threads)
    lone = cli("scale", "--proxy", proxy.address, *SHORT, "--out", tmp_path)
    assert lone.returncode == 2 and "servers behind it" in one_error_line(lone)


def test_an_unreachable_proxy_is_exit_3_naming_it(
        cli: InProcess, pool: tuple[list[PrivateMemcached], PrivateTwemproxy],
        tmp_path: Path) -> None:
    members, _ = pool
    address = unused_address()
    p = cli("scale", "--proxy", address, *_flags(members), *SHORT, "--out", tmp_path / "x")
    assert p.returncode == 3, p.stderr
    assert address in one_error_line(p)


def behind_rows(text: str) -> list[list[str]]:
    """The rows of the table's "behind the proxy" block, split in words."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("behind the proxy"))
    rows = []
    for line in lines[start + 2:]:
        if not line.strip():
            break
        rows.append(line.split())
    return rows


def report_behind_rows(html: str) -> list[str]:
    """The first cells of the report's "Behind the proxy" table."""
    block = html[html.index("Behind the proxy, as each server counted"):]
    block = block[:block.index("</table>")]
    return re.findall(r'<tr><td class="l">([^<]*)</td>', block)


def test_a_weighted_member_is_one_row_by_host_port_in_the_table_the_notes_and_report(
        pool: tuple[list[PrivateMemcached], PrivateTwemproxy], tmp_path: Path) -> None:
    members, _ = pool
    addresses = [m.address for m in members]
    given = [addresses[0], f"{addresses[1]}:2", addresses[2]]
    spec = ScaleSpec(points=[1, 2], repeats=1, warmup=0.2, settle=0.2, window=0.4,
                     interval=0.1, bootstrap=0, workload={"key_space": 1000})
    # The same servers behind a proxy that weighs the second one 2, as given.
    with PrivateTwemproxy(given, distribution="ketama", hash="md5") as weighted:
        r = scale(spec, server=weighted.address, behind=given)
    assert r.server["behind"] == addresses
    # One row per server, by host:port: no row for "host:port:2" with zeros.
    text = r.render()
    rows = behind_rows(text)
    assert [row[0] for row in rows] == addresses
    assert all(int(row[1]) > 0 for row in rows)
    # It took about half of the gets (weight 2 of 4; generous bounds).
    assert 0.3 < int(rows[1][1]) / sum(int(row[1]) for row in rows) < 0.7
    # The note on this machine's CPUs counts the three servers.
    note = next(line for line in text.splitlines() if "share this machine's" in line)
    assert "the proxy and 3 server(s) behind it" in note
    # The report's section shows the same rows.
    r.write(tmp_path, plots=False)
    assert report_behind_rows(render_report([tmp_path]).html) == addresses
    # A sweep saved with the weight in its list of servers behind is read by host:port.
    d = r.to_dict()
    d["server"]["behind"] = given
    assert [b["address"] for b in ScaleResult.from_dict(d).behind_totals() or []] == addresses
    # A server that stopped answering during a run (as load records it) is named first,
    # with the run, and its summed row is marked.
    run = d["runs"][1]
    run["behind"][1]["stopped"] = {"at_s": 0.3, "last_answer_s": 0.25,
                                   "traffic_until_s": 0.25, "error": "closed"}
    text = ScaleResult.from_dict(d).render()
    assert text.splitlines()[0].startswith(
        f"SERVER STOPPED: server {addresses[1]} behind the proxy stopped answering at 0.3 s "
        f"in run {run['order'] + 1} (N = {run['n']}): its counts are up to then")
    row = next(row for row in behind_rows(text) if row[0] == addresses[1])
    assert " ".join(row[5:]) == f"stopped at 0.3 s in run {run['order'] + 1} (N = {run['n']})"
