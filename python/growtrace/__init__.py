"""growtrace, installed with pip: the `growtrace` command, its preload library and the CPython
agent, laid out under this package's ``_native`` folder as under any install prefix
(docs/install.md). The ``growtrace`` script on the environment's PATH runs the command."""

import os

__all__ = ["native_prefix", "command_path"]


def native_prefix() -> str:
    """The install prefix inside the package: bin/, lib/, share/growtrace/python/."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native")


def command_path() -> str:
    """The `growtrace` executable."""
    return os.path.join(native_prefix(), "bin", "growtrace")
