"""``socai.rules.shedding_play`` is ``socai.rules.climbing.shedding_play``: one module, two names.

The hand engine Tiến Lên and Sâm Lốc share lives in its family's package; DESIGN.md and code
outside this repository import it as ``socai.rules.shedding_play``. Importing that name puts
``socai.rules.climbing.shedding_play`` in its place in ``sys.modules`` (CPython's import
returns what ``sys.modules`` holds once a module has run), so the registry, ``isinstance``
and pickles see one module and one set of classes under either name
(``tests/unit/rules/test_flat_names.py``). The star import shows type checkers its names.
"""

import sys
from typing import TYPE_CHECKING

from socai.rules.climbing import shedding_play

if TYPE_CHECKING:
    from socai.rules.climbing.shedding_play import *  # noqa: F403

sys.modules[__name__] = shedding_play
