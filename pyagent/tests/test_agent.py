"""The CPython agent, without the preload library: records go to $GROWTRACE_PYAGENT_LOG.

Runs the stdlib test programs of test_programs/python under every CPython growtrace reads that
is installed here (3.10, 3.11 shared and Debian's static 3.11, 3.12, 3.13: the project's venvs,
see tools/setup_python.sh) with the agent built for each (build/share/growtrace/python), and
checks what the agent recorded. A version that is absent is skipped, saying why.

    .venv/bin/python -m pytest pyagent/tests -q
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PYAGENT = REPO / "pyagent"
STARTUP = PYAGENT / "startup"
PROGRAMS = REPO / "test_programs" / "python"
AGENTS = Path(os.environ.get("GROWTRACE_BUILD_DIR", REPO / "build")) / "share" / "growtrace" / "python"

sys.path.insert(0, str(PROGRAMS))
from _common import mark_line  # noqa: E402

# name -> interpreter, as the end-to-end tests name them (tests/e2e/e2e_support.h).
INTERPRETERS = {
    "3.10": REPO / ".venv-3.10" / "bin" / "python",
    "3.11": REPO / ".venv" / "bin" / "python",
    "3.11-static": Path("/usr/bin/python3.11"),
    "3.12": REPO / ".venv-3.12" / "bin" / "python",
    "3.13": REPO / ".venv-3.13" / "bin" / "python",
}
PYTHONS = [pytest.param(str(path), id=name) for name, path in INTERPRETERS.items()]


def extension_for(python: str) -> str:
    """The agent built for `python` (its extension suffix picks it), or skips the test."""
    if not os.path.exists(python):
        pytest.skip(f"{python} is not installed (tools/setup_python.sh makes the venvs)")
    suffix = subprocess.run([python, "-c", "import _imp; print(_imp.extension_suffixes()[0])"],
                            capture_output=True, text=True, check=True).stdout.strip()
    path = AGENTS / f"_growtrace_agent{suffix}"
    if not path.exists():
        pytest.skip(f"no agent built for {python} ({path}): its headers were not found at build time")
    return str(path)


@pytest.fixture
def extension(python: str) -> str:
    return extension_for(python)


def decoration_line(python: str, program: str, mark: str) -> int:
    """The line CPython runs a decorator at: its own line from 3.11 on; before, the line of the
    `def` below it (the decorator on the marked line is directly above its def)."""
    version = subprocess.run([python, "-c", "import sys; print(sys.version_info[1])"], capture_output=True,
                             text=True, check=True).stdout.strip()
    return mark_line(program, mark) + (1 if int(version) < 11 else 0)


def run(extension: str, python: str, program: str, *args: str, tmp_path: Path, env: dict | None = None,
        pythonpath: str | None = None) -> tuple[list[dict], str]:
    log = tmp_path / f"{Path(program).stem}.{Path(python).name}.jsonl"
    log.unlink(missing_ok=True)
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "GROWTRACE_"))}
    full_env.update({
        "PYTHONPATH": str(STARTUP) + (os.pathsep + pythonpath if pythonpath else ""),
        "GROWTRACE_PYTHONPATH_ORIG": pythonpath or "",
        "GROWTRACE_PYAGENT_EXT": extension,
        "GROWTRACE_PYAGENT_LOG": str(log),
    })
    full_env.update(env or {})
    proc = subprocess.run([python, program, *args], env=full_env, capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "growtrace:" not in proc.stderr, proc.stderr
    records = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return records, proc.stdout


def caches_from(records: list[dict], file_name: str) -> list[dict]:
    return [r for r in records if r["kind"] == "cache_create" and r["creator_file"].endswith(file_name)]


def misses(records: list[dict], cache_id: int, kind: str = "cache_miss_begin") -> list[dict]:
    return [r for r in records if r["kind"] == kind and r["cache_id"] == cache_id]


@pytest.mark.parametrize("python", PYTHONS)
def test_lru_growth_threads(extension, python, tmp_path):
    program = str(PROGRAMS / "lru_growth.py")
    requests = 120
    records, out = run(extension, python, program, "--requests", str(requests), "--interval", "0",
                       tmp_path=tmp_path)
    assert f"currsize={2 * requests}" in out
    (cache,) = caches_from(records, "lru_growth.py")
    assert cache["module"] == "__main__" and cache["qualname"] == "adapter_for"
    assert cache["creator_line"] == decoration_line(python, program, "cache_created")
    assert cache["bound_names"] == ["__main__.adapter_for"]
    assert cache["maxsize"] == -1
    assert cache["stack"][0].startswith(f"{program}:{decoration_line(python, program, 'cache_created')}:")

    begins = misses(records, cache["cache_id"])
    ends = misses(records, cache["cache_id"], "cache_miss_end")
    assert len(begins) == len(ends) == 2 * requests
    assert [r["seq"] for r in begins] == list(range(1, 2 * requests + 1))
    assert [r["entries_before"] for r in begins] == list(range(2 * requests))
    assert all(r["status"] == "stored" and r["value_type"] == "dict" for r in ends)
    union_line = mark_line(program, "cache_call_union")
    class_line = mark_line(program, "cache_call_class")
    keys = Counter(r["key"] for r in begins)
    assert keys == {
        "(typing.Union[__main__.ParsedMessage[Fact], __main__.ToolCall],)": requests,
        "(__main__.ParsedText[Fact],)": requests,
    }
    lines = Counter(r["stack"][0].rsplit(":", 2)[1] for r in begins)
    assert lines == {str(union_line): requests, str(class_line): requests}
    assert all(r["stack"][0].endswith(":handle_request") for r in begins)
    # Every request keys the cache on a class that is new but has the same name.
    message_keys = {r["key_types"][0] for r in begins if r["key"].startswith("(typing.Union")}
    assert len(message_keys) == requests
    # ... and the gc scan saw those classes being created (those still in generation 0 when
    # the program ended are not reported).
    created = [r for r in records if r["kind"] == "type_create" and r["qualname"] == "ParsedMessage[Fact]"]
    assert len(created) >= 0.8 * requests
    assert {r["address"] for r in created} <= message_keys
    assert all(r["module"] == "__main__" and r["metaclass"] == "type" for r in created)


@pytest.mark.parametrize("python", PYTHONS)
def test_lru_growth_single_thread_stops(extension, python, tmp_path):
    records, out = run(extension, python, str(PROGRAMS / "lru_growth.py"), "--mode", "single",
                       "--requests", "100", "--interval", "0", tmp_path=tmp_path)
    (cache,) = caches_from(records, "lru_growth.py")
    assert len(misses(records, cache["cache_id"])) == 2


@pytest.mark.parametrize("python", PYTHONS)
def test_bounded_lru(extension, python, tmp_path):
    program = str(PROGRAMS / "bounded_lru.py")
    records, _ = run(extension, python, program, "--iterations", "3000", tmp_path=tmp_path)
    (cache,) = caches_from(records, "bounded_lru.py")
    assert cache["maxsize"] == 64 and cache["bound_names"] == ["__main__.render"]
    assert cache["creator_line"] == decoration_line(python, program, "cache_created")
    begins = misses(records, cache["cache_id"])
    assert len(begins) == 3000
    assert max(r["entries_before"] for r in begins) == 64
    assert {r["key"] for r in begins} == {"(int,)"}
    assert {r["stack"][0] for r in begins} == {f"{program}:{mark_line(program, 'cache_call')}:main"}


@pytest.mark.parametrize("python", PYTHONS)
def test_finite_keys_cache(extension, python, tmp_path):
    records, _ = run(extension, python, str(PROGRAMS / "finite_keys_cache.py"), "--rounds", "200",
                     tmp_path=tmp_path)
    (cache,) = caches_from(records, "finite_keys_cache.py")
    assert cache["maxsize"] == -1
    assert len(misses(records, cache["cache_id"])) == 256


@pytest.mark.parametrize("python", PYTHONS)
def test_growing_dict_is_not_a_cache(extension, python, tmp_path):
    records, _ = run(extension, python, str(PROGRAMS / "growing_dict.py"), "--iterations", "2000",
                     "--pause-every", "0", tmp_path=tmp_path)
    assert caches_from(records, "growing_dict.py") == []
    assert not any("growing_dict.py" in r.get("stack", [""])[0] for r in records
                   if r["kind"] == "cache_miss_begin")


@pytest.mark.parametrize("python", PYTHONS)
def test_stdlib_caches_are_bounded(extension, python, tmp_path):
    records, _ = run(extension, python, str(PROGRAMS / "re_typing_caches.py"), "--rounds", "2",
                     tmp_path=tmp_path)
    created = {r["cache_id"]: r for r in records if r["kind"] == "cache_create"}
    inserted = {r["cache_id"] for r in records if r["kind"] == "cache_miss_begin"}
    assert inserted, "typing's caches should have been seen filling"
    assert inserted <= set(created)
    assert all(created[c]["maxsize"] >= 0 for c in inserted)
    assert any(created[c]["module"] == "typing" for c in inserted)


@pytest.mark.parametrize("python", PYTHONS)
def test_types_churn(extension, python, tmp_path):
    program = str(PROGRAMS / "types_churn.py")
    records, _ = run(extension, python, program, "--iterations", "5000", tmp_path=tmp_path)
    payload = [r for r in records if r["kind"] == "type_create" and r["qualname"] == "Payload"]
    assert len(payload) >= 0.9 * 5000
    assert all(r["module"] == "__main__" for r in payload)


@pytest.mark.parametrize("python", PYTHONS)
def test_gc_scan_finds_every_class(extension, python, tmp_path):
    """Without the library's class hook the agent finds classes in generation 0 at collections.
    A collection that starts while type() has allocated a class but not made it ready yet sees
    it unready, then promotes it: the agent looks for it again at the next collection. The
    factory's allocations set off such collections (two in 3000 classes, on 3.11)."""
    program = str(PROGRAMS / "gc_class_factory.py")
    records, out = run(extension, python, program, "--requests", "3000", "--seconds", "0", "--window", "300",
                       "--threshold2", "1000000", tmp_path=tmp_path)
    assert "requests=3000" in out
    schema = [r for r in records if r["kind"] == "type_create" and r["qualname"] == "Schema"]
    assert len(schema) == 3000
    assert all(r["module"] == "__main__" and r["metaclass"] == "type" for r in schema)


INVISIBLE = r'''
import functools, os, sys, traceback
here = os.path.dirname(os.path.abspath(__file__))
report = {}
report["agent_dir_on_path"] = any("pyagent" in p for p in sys.path)
report["pythonpath"] = os.environ.get("PYTHONPATH")
report["growtrace_env"] = sorted(k for k in os.environ if k.startswith("GROWTRACE_PYTHONPATH"))
report["sitecustomize"] = getattr(sys.modules.get("sitecustomize"), "__file__", None)
report["user_site_ran"] = os.environ.get("USER_SITECUSTOMIZE_RAN")
report["agent_modules"] = sorted(m for m in sys.modules if "growtrace" in m)
report["wrapper_is_type"] = isinstance(functools._lru_cache_wrapper, type)

def boom(x):
    raise ValueError(x)
cached = functools.lru_cache(maxsize=None)(boom)
report["isinstance"] = isinstance(cached, functools._lru_cache_wrapper)
report["wrapped"] = cached.__wrapped__ is boom
report["name"] = (cached.__name__, cached.__qualname__, cached.__module__)
try:
    cached(1)
except ValueError:
    report["traceback_files"] = sorted({f.filename for f in traceback.extract_tb(sys.exc_info()[2])})
report["cache_info"] = list(cached.cache_info())
report["lru_cache_name"] = (functools.lru_cache.__name__, functools.lru_cache.__qualname__,
                            functools.lru_cache.__module__)
report["gc_callbacks"] = len(__import__("gc").callbacks)
import json
print(json.dumps(report))
'''


@pytest.mark.parametrize("python", PYTHONS)
@pytest.mark.parametrize("user_site", [False, True])
def test_agent_is_invisible(extension, python, user_site, tmp_path):
    program = tmp_path / "invisible.py"
    program.write_text(INVISIBLE)
    pythonpath = None
    if user_site:
        user = tmp_path / "user_site"
        user.mkdir()
        (user / "sitecustomize.py").write_text("import os\nos.environ['USER_SITECUSTOMIZE_RAN'] = '1'\n")
        pythonpath = str(user)
    _, out = run(extension, python, str(program), tmp_path=tmp_path, pythonpath=pythonpath)
    report = json.loads(out)
    assert report["agent_dir_on_path"] is False
    assert report["pythonpath"] == pythonpath
    assert report["growtrace_env"] == []
    assert report["agent_modules"] == []
    assert report["wrapper_is_type"] and report["isinstance"] and report["wrapped"]
    assert report["name"] == ["boom", "boom", "__main__"]
    assert report["traceback_files"] == [str(program)]
    assert report["cache_info"] == [0, 1, None, 0]
    assert report["lru_cache_name"] == ["lru_cache", "lru_cache", "functools"]
    assert report["gc_callbacks"] == 0  # the agent's callback is in the collector's own list
    if user_site:
        assert report["user_site_ran"] == "1"
        assert report["sitecustomize"] == str(tmp_path / "user_site" / "sitecustomize.py")
    else:
        system_site = subprocess.run([python, "-c", "import sitecustomize as s; print(s.__file__)"],
                                     capture_output=True, text=True, env={"PATH": os.environ["PATH"]})
        expected = system_site.stdout.strip() or None
        assert report["sitecustomize"] == expected


ATTACHED_PROGRAM = '''
import functools, gc, json, os, sys

@functools.lru_cache(maxsize=None)  # mark: square_created
def square(x):
    return x * x

square(1)
callbacks_before = len(gc.callbacks)
# What the preload library does in an attached process (growtrace attach), with a log sink.
loader_file = os.path.join(sys.argv[1], "growtrace-loader.py")
loader = {}
exec(compile(open(loader_file, "rb").read(), loader_file, "exec"), loader)
ext, agent = loader["load"](sys.argv[2], os.path.join(sys.argv[1], "growtrace-agent.py"))
detach = agent.install(ext, sys.argv[3], sys.argv[2], attached=True)
callbacks_attached = len(gc.callbacks)

square(2)

@functools.lru_cache(maxsize=8)  # mark: cube_created
def cube(x):
    return x ** 3

cube(3)
during = sorted({type(r).__name__ for f in (square, cube) for r in gc.get_referents(f)})
detach()
square(4)
cube(5)
after = sorted({type(r).__name__ for f in (square, cube) for r in gc.get_referents(f)})
print(json.dumps({"during": during, "after": after, "callbacks": [callbacks_before, callbacks_attached,
                  len(gc.callbacks)], "square": list(square.cache_info()), "cube": list(cube.cache_info()),
                  "results": [square(2), square(4), cube(3), cube(5)]}))
'''


@pytest.mark.parametrize("python", PYTHONS)
def test_attached_agent_probes_existing_and_new_caches_and_detach_undoes_it(extension, python, tmp_path):
    program = tmp_path / "attached.py"
    program.write_text(ATTACHED_PROGRAM)
    log = tmp_path / "attached.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "GROWTRACE_"))}
    proc = subprocess.run([python, str(program), str(STARTUP), extension, str(log)], env=env,
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    state = json.loads(proc.stdout)
    records = [json.loads(line) for line in log.read_text().splitlines()]

    creates = {r["qualname"]: r for r in records if r["kind"] == "cache_create"}
    square, cube = creates["square"], creates["cube"]
    assert square["flags"] & 2, "square existed before the agent: PREEXISTING"
    assert square["creator_line"] == mark_line(str(program), "square_created")  # read from the source
    assert square["bound_names"] == ["__main__.square"]
    assert square["entries"] == 1
    assert cube["maxsize"] == 8 and not cube["flags"] & 2
    assert cube["creator_line"] == decoration_line(python, str(program), "cube_created")
    assert cube["bound_names"] == ["__main__.cube"]

    # One miss each while attached, none after the detach.
    begins = Counter(r["cache_id"] for r in records if r["kind"] == "cache_miss_begin")
    assert begins == {square["cache_id"]: 1, cube["cache_id"]: 1}
    keys = [r["key"] for r in records if r["kind"] == "cache_miss_begin"]
    assert keys == ["(int,)", "(int,)"]

    # The probe sat between each wrapper and its function, and is gone after the detach.
    assert "Probe" in state["during"]
    assert "Probe" not in state["after"] and "function" in state["after"]
    before, attached, after = state["callbacks"]
    assert after == before == attached
    assert state["square"] == [0, 3, None, 3]  # hits, misses, maxsize, currsize
    assert state["cube"] == [0, 2, 8, 2]
    assert state["results"] == [4, 16, 27, 125]


DETACH_DURING_CALLBACK = '''
import gc, json, os, sys, threading, time

collector_list = gc.callbacks
calls = []
detach_in_callback, in_callback, detached = threading.Event(), threading.Event(), threading.Event()

def slow(phase, info):
    calls.append(phase)
    if phase == "start" and detach_in_callback.is_set():
        detach_in_callback.clear()
        in_callback.set()
        detached.wait(60)  # gives up the GIL: the detach runs meanwhile

gc.callbacks.append(slow)
loader_file = os.path.join(sys.argv[1], "growtrace-loader.py")
loader = {}
exec(compile(open(loader_file, "rb").read(), loader_file, "exec"), loader)
ext, agent = loader["load"](sys.argv[2], os.path.join(sys.argv[1], "growtrace-agent.py"))
detach = agent.install(ext, sys.argv[3], sys.argv[2], attached=True)
state = {"attached": [[c.__name__ for c in gc.callbacks], gc.callbacks is collector_list,
                      gc.is_tracked(collector_list)]}
calls.clear()
gc.collect()
state["calls_attached"] = list(calls)
calls.clear()
detach_in_callback.set()
in_thread = []
def detach_now():
    in_callback.wait(60)
    detach()
    in_thread.append(gc.callbacks is collector_list)
    detached.set()
thread = threading.Thread(target=detach_now)
thread.start()
gc.collect()  # the detach comes while `slow` waits at this collection's start
thread.join()
state["calls_detaching"] = list(calls)
state["given_back_at_once"] = in_thread
for _ in range(100):  # the pending call that gives the list back runs in the eval loop
    pass
calls.clear()
gc.collect()
state["after"] = [[c.__name__ for c in gc.callbacks], gc.callbacks is collector_list,
                  gc.is_tracked(collector_list), list(calls)]
print(json.dumps(state))
'''


# Attached, the agent's callback is not in gc.callbacks; the program's are called once a phase
# through it. A detach while one of them has given up the GIL gives the collector's list back
# only after that collection is done with the agent's callback, each called once all the same.
@pytest.mark.parametrize("python", PYTHONS)
def test_attached_agent_leaves_gc_callbacks_as_they_were(extension, python, tmp_path):
    program = tmp_path / "detach_during_callback.py"
    program.write_text(DETACH_DURING_CALLBACK)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "GROWTRACE_"))}
    proc = subprocess.run([python, str(program), str(STARTUP), extension, str(tmp_path / "log.jsonl")], env=env,
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    state = json.loads(proc.stdout)
    assert state["attached"] == [["slow"], False, False]
    assert state["calls_attached"] == ["start", "stop"]
    assert state["calls_detaching"] == ["start", "stop"]
    assert state["given_back_at_once"] == [False]
    assert state["after"] == [["slow"], True, True, ["start", "stop"]]


ELEMENT_PATHS = '''
class Holder:
    def __init__(self):
        self.items = {i: i for i in range(100)}


class Loud(str):
    def __repr__(self):
        raise RuntimeError("the walk ran a key's own __repr__")


BY_NAME = {"first": Holder(), "middle": Holder(), "last": Holder()}
BY_INT = {7: Holder()}
BY_SUBCLASS_KEY = {Loud("k"): Holder()}
BY_TUPLE_KEY = {("a", 1): Holder()}
BY_LONG_KEY = {"x" * 100: Holder()}
HANDLERS = [Holder(), Holder(), Holder()]
'''


@pytest.mark.parametrize("python", PYTHONS)
def test_container_paths_into_elements(extension, python, tmp_path):
    # The walk at exit names each container an element holds by the subscript a person would
    # type: a str's or an int's repr (the built-in's, never a subclass's), [...] otherwise, a
    # list's index; only the first and the last element of each container are looked into.
    program = tmp_path / "element_paths.py"
    program.write_text(ELEMENT_PATHS)
    records, _ = run(extension, python, str(program), tmp_path=tmp_path)
    # A container line names "kind" twice (the record's, then the container's): json keeps the
    # second.
    names = {r["name"] for r in records if "owner" in r and "entries" in r}
    for expected in ["__main__.BY_NAME['first'].items", "__main__.BY_NAME['last'].items", "__main__.BY_INT[7].items",
                     "__main__.BY_SUBCLASS_KEY[...].items", "__main__.BY_TUPLE_KEY[...].items",
                     "__main__.BY_LONG_KEY[...].items", "__main__.HANDLERS[0].items", "__main__.HANDLERS[2].items"]:
        assert expected in names, sorted(names)
    assert not any("middle" in n or "HANDLERS[1]" in n for n in names), sorted(names)


WALKED_CLASS_DIES = '''
import gc, time, weakref

from _common import AgentWalks

HOLDER = {}


def make_and_walk(walks):
    class Made:
        def __init__(self):
            self.items = {i: i for i in range(100)}

    HOLDER["made"] = [Made() for _ in range(3)]
    first = walks()
    deadline = time.monotonic() + 30
    while walks() < first + 2 and time.monotonic() < deadline:
        gc.collect()  # without the library, walks run at the end of collections
        time.sleep(0.02)
    return weakref.ref(Made), walks() - first


ref, walked = make_and_walk(AgentWalks().count)
del HOLDER["made"]
gc.collect()
print(walked, ref() is None)
'''


@pytest.mark.parametrize("python", PYTHONS)
def test_a_class_the_walks_saw_dies_with_its_last_instance(extension, python, tmp_path):
    # The walks remember, for their own speed, what each class's instances are to them; that
    # memory must not keep a class of the program's alive once the program let it go.
    program = tmp_path / "walked_class_dies.py"
    program.write_text(WALKED_CLASS_DIES)
    _records, out = run(extension, python, str(program), tmp_path=tmp_path, pythonpath=str(PROGRAMS))
    walked, died = out.split()
    assert int(walked) >= 2, out
    assert died == "True", "a class the walks saw outlived its last instance and the program's references"


WALKS_AFTER_IMPORTS = '''
import gc, sys, time, types

from _common import AgentWalks

REQUESTS = {}


def fill(count):
    for _ in range(count):
        REQUESTS[f"req-{len(REQUESTS)}"] = len(REQUESTS)


walks = AgentWalks().count
fill(100)
deadline = time.monotonic() + 30
while walks() < 1 and time.monotonic() < deadline:
    gc.collect()  # without the library, walks run at the end of collections
    time.sleep(0.02)
first = walks()
# Ten times as many modules as the first walk saw: the next walk is expected to cost ten times
# as much, so it waits ten times as long (seconds, where the period alone would allow one every
# quarter of a second).
for i in range(10 * len(sys.modules)):
    sys.modules[f"_gt_imported_{i}"] = types.ModuleType(f"_gt_imported_{i}")
end = time.monotonic() + 1.5
while time.monotonic() < end:
    fill(10)
    gc.collect()
    time.sleep(0.02)
fill(7)
print(first, walks() - first, len(REQUESTS))
'''


@pytest.mark.parametrize("python", PYTHONS)
def test_walks_wait_for_the_cost_the_modules_loaded_since_add(extension, python, tmp_path):
    # After the first walk the program loads ten times as many modules: no walk runs in the
    # next 1.5 s although a collection ends every 20 ms, and the walk at exit, not due, measures
    # only the module of the container already tracked (flags FINAL | TRACKED_ONLY) and finds
    # it with all its entries.
    program = tmp_path / "walks_after_imports.py"
    program.write_text(WALKS_AFTER_IMPORTS)
    records, out = run(extension, python, str(program), tmp_path=tmp_path, pythonpath=str(PROGRAMS))
    first, later, entries = (int(x) for x in out.split())
    assert first >= 1 and later == 0, out
    requests = [r for r in records if r.get("name") == "__main__.REQUESTS" and "entries" in r]
    assert len(requests) == 2, requests  # the first walk's and the last one's
    assert requests[-1]["flags"] == 2 | 4 and requests[-1]["entries"] == entries, requests[-1]
    assert requests[0]["flags"] & 4 == 0 and requests[0]["entries"] == 100, requests[0]
