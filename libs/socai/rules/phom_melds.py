"""``socai.rules.phom_melds`` is ``socai.rules.rummy.phom_melds``: one module, two names.

Phỏm's card logic lives in its family's package; DESIGN.md and code outside this repository
import it as ``socai.rules.phom_melds``. Importing that name puts
``socai.rules.rummy.phom_melds`` in its place in ``sys.modules`` (CPython's import returns
what ``sys.modules`` holds once a module has run), so the registry, ``isinstance`` and
pickles see one module and one set of classes under either name
(``tests/unit/rules/test_flat_names.py``). The star import shows type checkers its names.
"""

import sys
from typing import TYPE_CHECKING

from socai.rules.rummy import phom_melds

if TYPE_CHECKING:
    from socai.rules.rummy.phom_melds import *  # noqa: F403

sys.modules[__name__] = phom_melds
