"""``socai.rules.bacay_chuong`` is ``socai.rules.three_card.bacay_chuong``: one module, two names.

Ba Cây Chương's game module lives in its family's package; DESIGN.md and code outside this
repository import it as ``socai.rules.bacay_chuong``. Importing that name puts
``socai.rules.three_card.bacay_chuong`` in its place in ``sys.modules`` (CPython's import
returns what ``sys.modules`` holds once a module has run), so the registry, ``isinstance``
and pickles see one module and one set of classes under either name
(``tests/unit/rules/test_flat_names.py``). The star import shows type checkers its names.
"""

import sys
from typing import TYPE_CHECKING

from socai.rules.three_card import bacay_chuong

if TYPE_CHECKING:
    from socai.rules.three_card.bacay_chuong import *  # noqa: F403

sys.modules[__name__] = bacay_chuong
