"""An error an agent's own code raises reaches the user as raised, not as Ray's wrapper.

Seen beside a CPU hog: an agent's prefill timed out on a set, and ``load --ray`` printed
``cachelab: error: ray::LoadAgent.prefill() (pid=…, ip=…) … Traceback …`` with the terminal's
colour codes, on one line: the text of Ray's ``RayTaskError`` (``as_instanceof_cause()`` keeps
it). The cause itself is raised now: the ServerTimeout's own line, exit 3.
"""

from __future__ import annotations

import pytest

from cachelab.errors import ServerTimeout
from cachelab.load.agents import agent_error

ray_exceptions = pytest.importorskip("ray.exceptions")


def _wrapped(cause: BaseException) -> BaseException:
    try:
        raise cause
    except BaseException as e:  # noqa: BLE001 - as Ray's worker catches it
        import traceback

        return ray_exceptions.RayTaskError("LoadAgent.prefill", traceback.format_exc(), e)


def test_an_agents_error_is_its_own_class_and_line() -> None:
    wrapped = _wrapped(ServerTimeout("127.0.0.5:52175: no reply within 1s"))
    assert "(pid=" in str(wrapped.as_instanceof_cause())  # what the user was shown
    got = agent_error(wrapped)
    assert type(got) is ServerTimeout
    assert str(got) == "127.0.0.5:52175: no reply within 1s"


def test_a_wrapper_without_a_cause_is_left_as_it_is() -> None:
    bare = ray_exceptions.RayError("the actor died")
    assert agent_error(bare) is bare
