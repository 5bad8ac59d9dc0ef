# growtrace start-up hook for CPython. `growtrace run` puts this folder first on PYTHONPATH;
# site.py imports it as `sitecustomize` once the interpreter is initialised, before __main__.
#
# It (1) takes itself out of the program's view: removes this folder from sys.path and puts
# the program's own PYTHONPATH back into os.environ; (2) starts the agent
# (growtrace-agent.py + the _growtrace_agent C extension, loaded by growtrace-loader.py by
# path, never entered in sys.modules); (3) imports the program's own `sitecustomize`, if any, so that it runs as it
# would have and is what `sys.modules["sitecustomize"]` holds afterwards; when there is none,
# it ends with the same ImportError site.py silently ignores, so no `sitecustomize` module is
# left behind at all.
#
# Environment (set by the launcher; every variable is in contracts/environment.h, which
# tests/unit/contracts_test.cpp holds this file to):
#   GROWTRACE_PYAGENT_EXT        path of a _growtrace_agent*.so: the agent built for this
#                                interpreter is the one beside it with this interpreter's
#                                extension suffix (default: ../build/ next to here)
#   GROWTRACE_PYTHONPATH_ORIG    the program's PYTHONPATH before the launcher prepended this
#                                folder; empty = it was unset. Absent = leave PYTHONPATH alone.
#   GROWTRACE_PYAGENT_LOG        JSON-lines log of the agent's records (tests; no tracer needed)
#   GROWTRACE_PYAGENT=0          do not start the agent (still chains sitecustomize)
# Failures never stop the program: one "growtrace: " line on stderr, and it runs untraced.


def _growtrace_startup():
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))

    def same_dir(entry):
        try:
            return os.path.samefile(entry or os.curdir, here)
        except OSError:
            return False

    sys.path[:] = [entry for entry in sys.path if not same_dir(entry)]
    sys.path_importer_cache.pop(here, None)
    if "GROWTRACE_PYTHONPATH_ORIG" in os.environ:
        original = os.environ.pop("GROWTRACE_PYTHONPATH_ORIG")
        if original:
            os.environ["PYTHONPATH"] = original
        else:
            os.environ.pop("PYTHONPATH", None)

    if os.environ.get("GROWTRACE_PYAGENT", "1") != "0":
        try:
            ext_path = _agent_for_this_interpreter(here)
            started = False
            if ext_path:
                loader_file = os.path.join(here, "growtrace-loader.py")
                loader = {"__name__": "_growtrace_loader"}
                with open(loader_file, "rb") as f:
                    exec(compile(f.read(), loader_file, "exec"), loader)
                ext, agent = loader["load"](ext_path, os.path.join(here, "growtrace-agent.py"))
                started = agent.install(ext, os.environ.get("GROWTRACE_PYAGENT_LOG") or None, ext_path) is not None
            if not started:
                # An interpreter growtrace has no agent for (the library has said what is
                # missing). Shutdown must still be marked, or whatever the interpreter frees
                # at exit would look like memory given back.
                _mark_exit_without_agent()
        except Exception as exc:  # the program must run regardless
            sys.stderr.write(f"growtrace: python agent not started: {type(exc).__name__}: {exc}\n")


def _agent_for_this_interpreter(here):
    # The agent is built once per CPython version, all builds in one folder: the one beside
    # $GROWTRACE_PYAGENT_EXT with this interpreter's extension suffix. None if there is none.
    import _imp
    import os

    named = os.environ.get("GROWTRACE_PYAGENT_EXT")
    folder = os.path.dirname(named) if named else os.path.join(os.path.dirname(here), "build")
    path = os.path.join(folder, "_growtrace_agent" + _imp.extension_suffixes()[0])
    return path if os.path.exists(path) else None


def _mark_exit_without_agent():
    # Registers the preloaded library's growtrace_program_exiting as the program's first
    # atexit callback, so that it runs last, as the agent's own would. Without the library
    # (no such symbol) nothing is registered.
    import atexit
    import ctypes

    try:
        mark = ctypes.CDLL(None).growtrace_program_exiting
    except (AttributeError, OSError):
        return
    mark.restype = None
    atexit.register(mark)


_growtrace_startup()
del _growtrace_startup, _agent_for_this_interpreter, _mark_exit_without_agent

# Chain to the program's own sitecustomize. Our module is in sys.modules under that name
# while it runs; the nested import finds the next one on sys.path (this folder is gone), and
# importlib then keeps the program's module as sys.modules["sitecustomize"].
import sys as _sys

del _sys.modules["sitecustomize"]
del _sys
import sitecustomize  # noqa: E402,F401  (raises ImportError(name="sitecustomize") if none)
