"""The owned Jupyter Server's main program: it stops the server once the process that started it is gone.

Runs beside the kernel, as `python -c <run this file> MODULE ARG...` (`inside.run_by_path`): it
runs MODULE as `python -m MODULE ARG...` would, plus what a kernel's `parent_handle` gives. A
daemon killed with SIGKILL cannot stop its Jupyter Server, so the server SIGTERMs itself once its
parent is gone, which shuts its kernels down. Standard library only, like every program here.
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
import threading
import time

CHECK_EVERY_S = 1.0
"""How often the parent is looked for: a reparented process gets no event of its own."""


def stop_when_orphaned(parent: int) -> None:
    """SIGTERM this process once it is no longer `parent`'s child."""
    while os.getppid() == parent:
        time.sleep(CHECK_EVERY_S)
    os.kill(os.getpid(), signal.SIGTERM)


def main() -> None:
    threading.Thread(target=stop_when_orphaned, args=(os.getppid(),), daemon=True).start()
    del sys.argv[0]  # `-c`: the module's own arguments follow its name
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
