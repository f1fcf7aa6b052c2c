"""``socai.rules.evaluator`` is ``socai.rules.poker.evaluator``: one module, two names.

Hold'em's hand evaluator lives in its family's package; DESIGN.md and code outside this
repository import it as ``socai.rules.evaluator``. Importing that name puts
``socai.rules.poker.evaluator`` in its place in ``sys.modules`` (CPython's import returns
what ``sys.modules`` holds once a module has run), so the registry, ``isinstance`` and
pickles see one module and one set of classes under either name
(``tests/unit/rules/test_flat_names.py``). The star import shows type checkers its names.
"""

import sys
from typing import TYPE_CHECKING

from socai.rules.poker import evaluator

if TYPE_CHECKING:
    from socai.rules.poker.evaluator import *  # noqa: F403

sys.modules[__name__] = evaluator
