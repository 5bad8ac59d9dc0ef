"""`growtrace ...` (the script pip puts on PATH) and `python -m growtrace ...`: replaces this
process with the packaged command, which finds its library and agent beside itself."""

import os
import sys

from . import command_path


def main() -> None:
    command = command_path()
    if not os.access(command, os.X_OK):
        sys.stderr.write(f"growtrace: error: the packaged command is missing: {command} (reinstall growtrace)\n")
        sys.exit(2)
    os.execv(command, [command, *sys.argv[1:]])


if __name__ == "__main__":
    main()
