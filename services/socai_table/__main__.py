"""``python -m socai_table``: the table service.

With ``SOCAI_TABLE_PROFILE=<path>`` the whole process runs under cProfile and writes its
statistics to ``path`` when it stops; SIGUSR1 starts the statistics afresh and SIGUSR2
writes them at once (the benchmark profiles only its measuring window that way). This is
how the benchmarks say where the table service's time goes: no sampling profiler is
installed on the machine, and the launcher stays the same.
"""

import os
import signal
from typing import Any

from socai.infra.service import run
from socai_table.app import build_app

PROFILE_ENV = "SOCAI_TABLE_PROFILE"


def main() -> None:
    path = os.environ.get(PROFILE_ENV)
    if not path:
        run("table", build_app)
        return
    import cProfile

    profiler = cProfile.Profile()

    def restart(signum: int, frame: Any) -> None:
        profiler.disable()
        profiler.clear()
        profiler.enable()

    def dump(signum: int, frame: Any) -> None:
        profiler.disable()
        profiler.dump_stats(path)
        profiler.enable()

    signal.signal(signal.SIGUSR1, restart)
    signal.signal(signal.SIGUSR2, dump)
    profiler.enable()
    try:
        run("table", build_app)
    finally:
        profiler.disable()
        profiler.dump_stats(path)


if __name__ == "__main__":
    main()
