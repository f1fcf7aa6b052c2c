"""``socai.rules.phom`` is ``socai.rules.rummy.phom``: one module, two names.

Phỏm's game module lives in its family's package; DESIGN.md and code outside this repository
import it as ``socai.rules.phom``. Importing that name puts ``socai.rules.rummy.phom`` in
its place in ``sys.modules`` (CPython's import returns what ``sys.modules`` holds once a
module has run), so the registry, ``isinstance`` and pickles see one module and one set of
classes under either name (``tests/unit/rules/test_flat_names.py``). The star import shows
type checkers its names.
"""

import sys
from typing import TYPE_CHECKING

from socai.rules.rummy import phom

if TYPE_CHECKING:
    from socai.rules.rummy.phom import *  # noqa: F403

sys.modules[__name__] = phom
