"""``socai.rules.tienlen`` is ``socai.rules.climbing.tienlen``: one module, two names.

Tiến Lên's game module lives in its family's package; DESIGN.md and code outside this
repository import it as ``socai.rules.tienlen``. Importing that name puts
``socai.rules.climbing.tienlen`` in its place in ``sys.modules`` (CPython's import returns
what ``sys.modules`` holds once a module has run), so the registry, ``isinstance`` and
pickles see one module and one set of classes under either name
(``tests/unit/rules/test_flat_names.py``). The star import shows type checkers its names.
"""

import sys
from typing import TYPE_CHECKING

from socai.rules.climbing import tienlen

if TYPE_CHECKING:
    from socai.rules.climbing.tienlen import *  # noqa: F403

sys.modules[__name__] = tienlen
