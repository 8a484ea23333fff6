"""load through a real twemproxy in front of real memcached servers: every request goes to
the proxy, the servers behind it count them (their stats), and the verb says so."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cachelab import _core
from cachelab.errors import ServerError
from cachelab.load import LoadSpec, behind_headline, load, unused_notes
from cachelab.proxies import PrivateTwemproxy, find_nutcracker
from cachelab.report import render_report
from cachelab.servers import PrivateMemcached
from clitools import InProcess, one_error_line
from pools import loopback_pool

try:
    find_nutcracker()
except Exception as e:  # noqa: BLE001 - the reason is shown in the skip
    pytest.skip(f"no twemproxy: {e}", allow_module_level=True)


@pytest.fixture(scope="module")
def pool() -> Iterator[tuple[list[PrivateMemcached], PrivateTwemproxy]]:
    with loopback_pool() as members, PrivateTwemproxy(
            [m.address for m in members], distribution="ketama", hash="md5") as proxy:
        yield members, proxy


def test_requests_through_the_proxy_are_counted_by_the_servers_behind_it(
        pool: tuple[list[PrivateMemcached], PrivateTwemproxy]) -> None:
    members, proxy = pool
    spec = LoadSpec(duration=0.6, warmup=0.0, connections=2, key_space=2000,
                    mix={"get": 0.8, "set": 0.2})
    r = load(spec, server=proxy.address, behind=[m.address for m in members])
    assert r.server["proxy"] and r.server["address"] == proxy.address
    assert [b["address"] for b in r.behind] == [m.address for m in members]
    gets = [b["server"]["deltas"]["cmd_get"] for b in r.behind]
    sets = [b["server"]["deltas"]["cmd_set"] for b in r.behind]
    # Every get and set the client sent reached one server behind the proxy, and each server
    # got its share (ketama over three members).
    assert sum(gets) == r.all["ops"]["get"] and sum(sets) == r.all["ops"]["set"]
    assert all(g > 0.15 * sum(gets) for g in gets)
    assert r.server["deltas"]["cmd_get"] == sum(gets)
    text = r.render()
    assert "through the proxy" in text and "behind the proxy" in text


def test_the_cli_runs_through_a_proxy_and_asks_for_the_servers_behind_it(
        cli: InProcess, pool: tuple[list[PrivateMemcached], PrivateTwemproxy],
        tmp_path: Path) -> None:
    members, proxy = pool
    flags = [x for m in members for x in ("--server", m.address)]
    p = cli("load", "--proxy", proxy.address, *flags, "--duration", "0.5",
            "--key-space", "1000", "--out", tmp_path / "a")
    assert p.returncode == 0, p.stderr
    assert '"behind"' in p.stdout  # JSON on a pipe
    lone = cli("load", "--proxy", proxy.address, "--duration", "0.5", "--out", tmp_path / "b")
    assert lone.returncode == 2 and "servers behind it" in lone.stderr
    # Pointed at the proxy as if it were a memcached, the verb says what it is.
    direct = cli("load", "--server", proxy.address, "--duration", "0.5",
                 "--out", tmp_path / "c")
    assert direct.returncode == 2 and "proxy" in direct.stderr


def report_behind_rows(html: str) -> list[list[str]]:
    """The rows of the report's "Behind the proxy" table, as cell texts."""
    block = html[html.index("Behind the proxy, as each server counted"):]
    block = block[:block.index("</table>")]
    return [re.findall(r"<td[^>]*>([^<]*)</td>", row)
            for row in re.findall(r"<tr>(<td.*?)</tr>", block)]


def test_a_weighted_server_behind_is_one_row_by_host_port_here_and_in_the_report(
        pool: tuple[list[PrivateMemcached], PrivateTwemproxy], tmp_path: Path) -> None:
    members, _ = pool
    addresses = [m.address for m in members]
    given = [addresses[0], f"{addresses[1]}:2", addresses[2]]
    spec = LoadSpec(duration=0.5, warmup=0.0, connections=2, key_space=1000)
    with PrivateTwemproxy(given, distribution="ketama", hash="md5") as weighted:
        r = load(spec, server=weighted.address, behind=given)
    assert r.server["behind"] == addresses == [b["address"] for b in r.behind or []]
    r.write(tmp_path, plots=False)
    rows = report_behind_rows(render_report([tmp_path]).html)
    assert [row[0] for row in rows] == addresses
    gets = [b["server"]["deltas"]["cmd_get"] for b in r.behind or []]
    assert [int(row[1].replace(",", "")) for row in rows] == gets
    assert [row[-1] for row in rows] == ["–"] * 3  # none stopped


def _cmd_get(address: str) -> int | None:
    """The server's cmd_get, or None when it does not answer."""
    try:
        with _core.Client(address, timeout=1, connect_timeout=1) as c:
            return int(c.stats()["cmd_get"])
    except ServerError:
        return None


@pytest.mark.slow
def test_a_server_killed_behind_the_proxy_is_named_with_its_counts_up_to_then(
        tmp_path: Path) -> None:
    # Its own servers and proxy: one of them is killed.
    with loopback_pool() as members, PrivateTwemproxy(
            [m.address for m in members], distribution="ketama", hash="md5") as proxy:
        victim, others = members[1], [members[0], members[2]]
        start = _cmd_get(victim.address) or 0
        flags = [x for m in members for x in ("--server", m.address)]
        run = subprocess.Popen(
            [sys.executable, "-m", "cachelab", "load", "--proxy", proxy.address, *flags,
             "--duration", "5", "--warmup", "0", "--key-space", "1000", "--no-plots",
             "--format", "table", "--out", str(tmp_path / "run"), "--fail-on", "problems"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            # Kill it once it has served the run's gets for a while (the prefill only sets).
            deadline = time.monotonic() + 60
            while (_cmd_get(victim.address) or 0) < start + 500:
                assert time.monotonic() < deadline and run.poll() is None, "no traffic seen"
                time.sleep(0.05)
            time.sleep(1.0)
            served = (_cmd_get(victim.address) or 0) - start
            time.sleep(0.8)  # the run reads it every 0.25 s: its last reading comes after
            os.kill(victim.pid or 0, signal.SIGKILL)
            stdout, stderr = run.communicate(timeout=120)
        finally:
            if run.poll() is None:
                run.kill()
                run.communicate()
    # The run measured, but a server behind it died: a problem found (as a pool member
    # marked down is), which --fail-on problems fails in one line; the proxy's errors for
    # its keys are counted.
    assert run.returncode == 1, stderr
    line = one_error_line(stderr)
    assert line.startswith("cachelab: check failed: --fail-on problems: ") and \
        "stopped behind the proxy" in line, line
    doc = json.loads((tmp_path / "run" / "load.json").read_text())
    assert sum(doc["all"]["errors"].values()) > 0
    rows = {b["address"]: b for b in doc["behind"]}
    assert [b.get("stopped") for b in (rows[m.address] for m in others)] == [None, None]
    stopped = rows[victim.address]["stopped"]
    assert 0.5 <= stopped["at_s"] <= 6 and stopped["last_answer_s"] <= stopped["at_s"]
    # Its counts up to its last answer: at least what it had served when it was killed
    # (read by the test; the run's prefill and the stats reads count no gets).
    gets = rows[victim.address]["server"]["deltas"]["cmd_get"]
    assert gets >= served > 0
    # The headline names it, with the time its traffic stopped; its row shows its counts.
    lines = stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("SERVER STOPPED"))
    assert head < 3, stdout
    assert (f"server {victim.address} behind the proxy stopped answering at "
            f"{stopped['at_s']:.1f} s: its counts are up to then") in lines[head]
    row = next(line for line in lines if line.startswith(victim.address))
    assert row.split()[1] == str(gets) and f"stopped at {stopped['at_s']:.1f} s" in row
    # So does the report: its row, marked, and a finding that names it.
    html = render_report([tmp_path / "run"]).html
    marked = next(r for r in report_behind_rows(html) if r[0] == victim.address)
    assert marked[1] == f"{gets:,}" and marked[-1] == f"stopped at {stopped['at_s']:.1f} s"
    assert f"Server {victim.address} behind the proxy stopped answering at" in html


def test_a_server_behind_that_counted_no_get_is_named_in_the_headline() -> None:
    """memcached's ``cmd_get`` or a Redis's hits and misses: a server behind that counted no
    GET while another did is SERVER UNUSED, with the fix; a server that stopped answering is
    said to have stopped, not to be unused, and a run without GETs names none."""
    def server(address: str, stopped: bool = False, **deltas: int) -> dict[str, Any]:
        return {"address": address, "server": {"deltas": deltas},
                **({"stopped": {"at_s": 1.0, "last_answer_s": 0.5}} if stopped else {})}

    lines = behind_headline([server("a:1", cmd_get=900, cmd_set=100),
                             server("b:2", cmd_get=0, cmd_set=0),
                             server("c:3", stopped=True, cmd_get=0)])
    assert [line.split(":")[0] for line in lines] == ["SERVER STOPPED", "SERVER UNUSED"]
    assert lines[1].startswith("SERVER UNUSED: server b:2 behind the proxy answered none")
    assert "every key on the other server, so the run measured it alone" in lines[1]
    assert "--key-space of 1000" in lines[1]
    redis = [server("a:1", keyspace_hits=5, keyspace_misses=0),
             server("b:2", keyspace_hits=0, keyspace_misses=3),
             server("c:3", keyspace_hits=0, keyspace_misses=0, total_commands_processed=9)]
    assert [n.split()[1] for n in unused_notes(redis)] == ["c:3"]
    assert unused_notes([server("a:1", cmd_get=0, cmd_set=50),
                         server("b:2", cmd_get=0, cmd_set=40)]) == []
    assert unused_notes([server("a:1", cmd_get=7)]) == [] and unused_notes(None) == []
