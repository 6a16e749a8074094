"""``python -m tests.support.entry ARGS`` is ``coord ARGS`` with the engine the test chose
(``$COORD_TEST_ENGINE``, see engines.py) in place of the configured one."""
from __future__ import annotations

import os

from coordinator.cli.main import main as coord_main
from coordinator.engine import factory

from .engines import ENV, opener_for, refuse_engine_and_exit

if __name__ == "__main__":
    mode = os.environ.get(ENV, "")
    factory.use_engine(refuse_engine_and_exit if mode == "none" else opener_for(mode))
    coord_main()
