"""``python -m tests.support.entry ARGS`` is ``coord ARGS`` with the engine the test chose
(``$COORD_TEST_ENGINE``, see engines.py) in place of the configured one."""
from __future__ import annotations

from coordinator.cli.main import run

from .engines import use_chosen_engine_in_coord

if __name__ == "__main__":
    use_chosen_engine_in_coord()
    run()
