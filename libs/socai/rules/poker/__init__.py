"""The poker games: Texas Hold'em (``holdem``) and Xì Tố (``xito``), with Hold'em's fast
hand evaluator (``evaluator``). Both bet on the kit's ``pots``; Xì Tố's hands are ranked
by the shared ``ranking`` and its rounds run on the shared ``betting``."""
