"""The flat names ``socai.rules.<name>`` are the family packages' modules themselves.

DESIGN.md's public API names the game modules ``socai.rules.holdem``, ``socai.rules.maubinh``
…, and code outside this repository imports the shared engines the same way
(``socai.rules.shedding``, ``socai.rules.threecard_play`` …). Each such name is one module
object with the module in its family's package (``socai.rules.poker.holdem``): the registry,
``isinstance`` on state classes and pickles depend on there being one.
"""

from __future__ import annotations

import importlib
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

import socai.rules
from socai.cards import parse_cards
from socai.rules import registry
from socai.rules.three_card.threecard_play import LiengState

FLAT_NAMES = {
    "socai.rules.holdem": "socai.rules.poker.holdem",
    "socai.rules.xito": "socai.rules.poker.xito",
    "socai.rules.evaluator": "socai.rules.poker.evaluator",
    "socai.rules.threecard": "socai.rules.three_card.threecard",
    "socai.rules.threecard_play": "socai.rules.three_card.threecard_play",
    "socai.rules.lieng": "socai.rules.three_card.lieng",
    "socai.rules.lieng_sanh": "socai.rules.three_card.lieng_sanh",
    "socai.rules.bacay_ga": "socai.rules.three_card.bacay_ga",
    "socai.rules.bacay_chuong": "socai.rules.three_card.bacay_chuong",
    "socai.rules.shedding": "socai.rules.climbing.shedding",
    "socai.rules.shedding_play": "socai.rules.climbing.shedding_play",
    "socai.rules.tienlen": "socai.rules.climbing.tienlen",
    "socai.rules.samloc": "socai.rules.climbing.samloc",
    "socai.rules.phom": "socai.rules.rummy.phom",
    "socai.rules.phom_melds": "socai.rules.rummy.phom_melds",
    "socai.rules.maubinh": "socai.rules.chinese_poker.maubinh",
    "socai.rules.maubinh_hands": "socai.rules.chinese_poker.maubinh_hands",
    "socai.rules.taixiu": "socai.rules.dice.taixiu",
}
# What else sits at the top of the package: the kit and the engines several families share.
KIT = {"__init__", "base", "betting", "pots", "ranking", "automatic", "autoplay", "registry"}


@pytest.mark.parametrize(("flat", "home"), sorted(FLAT_NAMES.items()))
def test_a_flat_name_is_the_module_in_its_family(flat: str, home: str) -> None:
    module = importlib.import_module(flat)
    assert module is importlib.import_module(home)
    assert module.__name__ == home
    assert sys.modules[flat] is module
    assert getattr(socai.rules, flat.rpartition(".")[2]) is module


def test_the_top_of_the_package_holds_the_kit_and_the_flat_names_only() -> None:
    top = {path.stem for path in Path(socai.rules.__file__).parent.glob("*.py")}
    assert top - KIT == {flat.rpartition(".")[2] for flat in FLAT_NAMES}


def test_each_game_id_names_the_module_the_registry_gives() -> None:
    for game_id in registry.GAME_IDS:
        assert importlib.import_module(f"socai.rules.{game_id}") is registry.get(game_id)


def test_design_md_public_api_by_its_flat_names() -> None:
    import socai.rules.holdem as holdem
    from socai.rules.holdem import hand_value
    from socai.rules.maubinh import is_valid_arrangement, special_hand
    from socai.rules.poker import holdem as home
    from socai.rules.samloc import combo as samloc_combo
    from socai.rules.tienlen import beats, combo

    assert holdem is home
    assert hand_value is home.hand_value
    assert hand_value(parse_cards("As Ks Qs Js Ts 2h 3d")).category == "straight_flush"
    assert combo(parse_cards("3s 4c 5d")).kind == "straight"
    assert beats(combo(parse_cards("4s")), combo(parse_cards("3h")))
    assert samloc_combo(parse_cards("9s 9c 9d 9h Ts Tc Td Th")).kind == "two_fours"
    assert special_hand(parse_cards("2s 3s 4s 5s 6s 7s 8s 9s Ts Js Qs Ks As")) == "dragon_roll"
    assert is_valid_arrangement(parse_cards("2s 3c 4d"), parse_cards("5s 5c 7d 8h 9s"), parse_cards("As Ac Ad Kh Ks"))


def test_a_state_class_pickled_by_its_flat_name_loads_as_the_one_class() -> None:
    # A pickle names a class by its module and name: one written under the flat name
    # (protocol 0, written out) loads the class the family module defines.
    assert pickle.loads(b"csocai.rules.threecard_play\nLiengState\n.") is LiengState
    assert pickle.loads(pickle.dumps(LiengState)) is LiengState


@pytest.mark.parametrize("first", ["flat", "home"])
def test_a_fresh_interpreter_gets_one_module_whichever_name_is_imported_first(first: str) -> None:
    code = (
        "import importlib, sys\n"
        f"pairs = {sorted(FLAT_NAMES.items())!r}\n"
        f"first = {first!r}\n"
        "for flat, home in pairs:\n"
        "    a = importlib.import_module(flat if first == 'flat' else home)\n"
        "    b = importlib.import_module(home if first == 'flat' else flat)\n"
        "    assert a is b and a.__name__ == home and sys.modules[flat] is a, flat\n"
        "import socai.rules.holdem as h\n"
        "from socai.rules.holdem import hand_value\n"
        "from socai.rules import holdem\n"
        "import socai.rules.poker.holdem\n"
        "assert h is holdem is socai.rules.poker.holdem and hand_value is h.hand_value\n"
        "print('one module each')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "one module each"
