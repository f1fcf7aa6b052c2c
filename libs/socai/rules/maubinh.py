"""``socai.rules.maubinh`` is ``socai.rules.chinese_poker.maubinh``: one module, two names.

Mậu Binh's game module lives in its family's package; DESIGN.md and code outside this
repository import it as ``socai.rules.maubinh``. Importing that name puts
``socai.rules.chinese_poker.maubinh`` in its place in ``sys.modules`` (CPython's import
returns what ``sys.modules`` holds once a module has run), so the registry, ``isinstance``
and pickles see one module and one set of classes under either name
(``tests/unit/rules/test_flat_names.py``). The star import shows type checkers its names.
"""

import sys
from typing import TYPE_CHECKING

from socai.rules.chinese_poker import maubinh

if TYPE_CHECKING:
    from socai.rules.chinese_poker.maubinh import *  # noqa: F403

sys.modules[__name__] = maubinh
