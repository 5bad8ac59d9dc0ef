# growtrace CPython agent, loader. Executed (never imported: the name has a '-') in a private
# namespace by sitecustomize.py at start-up, and by the preload library when `growtrace
# attach` starts the agent in a running process. Nothing here enters sys.modules.


def load(ext_path, agent_file):
    # -> (extension module, agent module object). The extension is loaded by path; the
    # sys.modules entry single-phase initialisation makes is removed again.
    import _imp
    import sys

    class _Spec:  # what _imp.create_dynamic reads
        name = "_growtrace_agent"
        origin = ext_path

    had_name = "_growtrace_agent" in sys.modules
    ext = _imp.create_dynamic(_Spec)
    _imp.exec_dynamic(ext)
    if not had_name:
        sys.modules.pop("_growtrace_agent", None)
    agent = type(sys)("_growtrace_pyagent")
    agent.__file__ = agent_file
    with open(agent_file, "rb") as f:
        exec(compile(f.read(), agent_file, "exec"), agent.__dict__)
    return ext, agent


def attach(here, ext_path, api_address):
    # -> the agent's detach(), or None. Called under the GIL by a thread of the library.
    import os
    import sys

    try:
        ext, agent = load(ext_path, os.path.join(here, "growtrace-agent.py"))
        return agent.install(ext, None, ext_path, api=api_address, attached=True)
    except Exception as exc:  # the program must run regardless
        sys.stderr.write(f"growtrace: python agent not started: {type(exc).__name__}: {exc}\n")
        return None
