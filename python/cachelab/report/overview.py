"""The report's own parts: the run's step table (the first section when a run made the results)
and the environment the results were measured in; and how a run's step and an interrupted run
are told (:func:`step_text`, :func:`run_partial`), which ``run``'s own table uses too."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cachelab.answers import CERTIFIED, INDICATIVE, NOT_MEASURED, Answer
from cachelab.artifacts import Artifact
from cachelab.page.html import esc, table
from cachelab.page.section import Context, Section
from cachelab.units import of_asked, partial_note

__all__ = ["environment", "run_answers", "run_partial", "section", "step_answers", "step_text"]


def step_text(s: dict[str, Any]) -> str:
    """A step's line in the table: its summary and, when it failed or was skipped, why."""
    return "; ".join(x for x in (s.get("summary"), s.get("error")) if x)


def run_partial(d: dict[str, Any]) -> str | None:
    """The :func:`~cachelab.units.partial_note` of a run (``run.json``) that Ctrl-C stopped or
    whose server failed (``aborted``): how many of its steps finished, the one cut short,
    those never started; None for a run that went to the end."""
    interrupted, aborted = d.get("interrupted"), d.get("aborted")
    if not interrupted and not aborted:
        return None
    steps = d.get("steps", [])
    stopped = [s["name"] for s in steps if s.get("error") == "interrupted"]
    cut = [s["name"] for s in steps if s.get("error") == "interrupted" and s["status"] != "skipped"]
    never = [n for n in stopped if n not in cut]
    server = [s["name"] for s in steps if s.get("server_failure") and s["name"] not in stopped]
    done = ("steps finished: "
            + of_asked([len(steps) - len(stopped) - len(server)], len(steps)))
    done += f"; failed on the server: {', '.join(server)}" if server else ""
    done += f"; cut short: {', '.join(cut)}" if cut else ""
    done += f"; not run: {', '.join(never)}" if never else ""
    run = {"cancelled": bool(interrupted), "elapsed_s": d.get("elapsed_s"),
           "aborted": None if interrupted else aborted}
    return partial_note(run, done)


def step_answers(s: dict[str, Any]) -> list[Answer]:
    """A step's lines of the run's card: the answers its result gave (``steps[].answers``,
    each question after the step's name), a failed step's capped at *indicative*; a step
    that failed without answers, or was skipped, is *not measured* with its reason."""
    given = [Answer.from_dict(a) for a in s.get("answers") or []]
    failed = s.get("status") == "failed"
    if not given:
        if failed or s.get("status") == "skipped":
            what = "failed" if failed else "skipped"
            return [Answer(s["name"], "not measured", NOT_MEASURED,
                           f"{what}: {s.get('error') or 'no reason given'}")]
        return []
    out = []
    for a in given:
        trust, why = a.trust, a.why
        if failed and trust == CERTIFIED:
            trust, why = INDICATIVE, f"step failed: {s.get('error')}"
        out.append(Answer(f"{s['name']}: {a.question}", a.value, trust, why))
    return out


def run_answers(d: dict[str, Any]) -> list[Answer]:
    """The run's card (``run.json``'s content): every step's :func:`step_answers`, in order."""
    return [a for s in d.get("steps") or [] for a in step_answers(s)]


def section(art: Artifact, ctx: Context) -> Section:
    d = art.data
    sec = Section("The run", "run", art.path)
    partial = run_partial(d)
    if partial:
        sec.notes.append(partial)
    rows, classes = [], []
    for s in d["steps"]:
        rows.append([s["name"], s["status"], f"{s.get('elapsed_s', 0):.1f} s", step_text(s)])
        classes.append({"ok": "", "problems": "bad", "failed": "bad"}.get(s["status"], ""))
    sec.body.append(table(["step", "status", "time", "summary"], rows, left=1,
                          row_classes=classes))
    sec.body.append(f"<p>Total {d.get('elapsed_s', 0):.1f} s; server "
                    f"{esc(d.get('server', {}).get('address', '?'))}"
                    f"{' (private)' if d.get('server', {}).get('private') else ''}.</p>")
    for s in d["steps"]:
        if s["status"] == "failed":
            sec.notes.append(f"step {s['name']} failed: {s.get('error')}")
    return sec


_ENV_FIELDS = (("os", "OS"), ("kernel", "kernel"), ("cpu_model", "CPU"), ("cpus", "CPUs"),
               ("cpus_usable", "CPUs usable"), ("machine", "machine"), ("python", "Python"),
               ("cachelab_version", "cachelab"), ("commit", "commit"))


def environment(arts: Sequence[Artifact]) -> list[str]:
    """The machines and servers the results came from (each distinct one once)."""
    envs: list[dict[str, Any]] = []
    for a in arts:
        env = a.data.get("environment")
        if isinstance(env, dict) and env and env not in envs:
            envs.append(env)
    out = ["<h2 id=\"environment\">Environment</h2>"]
    if not envs:
        out.append("<p>The results carry no environment facts.</p>")
    for i, env in enumerate(envs):
        if len(envs) > 1:
            out.append(f"<h3>Machine {i + 1}</h3>")
        out.append('<dl class="env">' + "".join(
            f"<dt>{esc(label)}</dt><dd>{esc(env[k])}</dd>" for k, label in _ENV_FIELDS if k in env
        ) + "</dl>")
    servers: list[tuple[str, str, str, str]] = []
    for a in arts:
        srv = a.data.get("server")
        if not isinstance(srv, dict) or not srv.get("address"):
            continue
        argv = " ".join(map(str, srv.get("argv") or [])) or "—"
        row = (str(srv.get("address")), str(srv.get("version") or "?"),
               "private" if srv.get("private") else "given", argv)
        if row not in servers:
            servers.append(row)
    if servers:
        out.append("<h3>Servers</h3>")
        out.append(table(["address", "version", "started by", "command line"], servers, left=4))
    return out
