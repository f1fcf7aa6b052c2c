"""``socai.rules.bacay_ga`` is ``socai.rules.three_card.bacay_ga``: one module, two names.

3 Cây Gà's game module lives in its family's package; DESIGN.md and code outside this
repository import it as ``socai.rules.bacay_ga``. Importing that name puts
``socai.rules.three_card.bacay_ga`` in its place in ``sys.modules`` (CPython's import
returns what ``sys.modules`` holds once a module has run), so the registry, ``isinstance``
and pickles see one module and one set of classes under either name
(``tests/unit/rules/test_flat_names.py``). The star import shows type checkers its names.
"""

import sys
from typing import TYPE_CHECKING

from socai.rules.three_card import bacay_ga

if TYPE_CHECKING:
    from socai.rules.three_card.bacay_ga import *  # noqa: F403

sys.modules[__name__] = bacay_ga
