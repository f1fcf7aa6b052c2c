"""The one catalogue of reason codes (issue 36): found in the code, so none can be missed.

``socai docs api`` reads every code the library and the services raise from their source;
each needs a meaning (``socai.reason_codes``, or ``RULE_CODES`` for the games' refusals), no
meaning outlives its code, and the generated pages of docs/api are today's.
"""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from socai import errors, reason_codes
from socai.rules import base
from socai_cli import apidocs


@pytest.fixture(scope="module")
def raised() -> list[apidocs.Raised]:
    return apidocs.scan()


def test_every_code_raised_has_a_meaning_and_a_status(raised: list[apidocs.Raised]) -> None:
    codes = apidocs.catalogue(raised)
    assert len(codes) > 150
    for code in codes:
        assert code.meaning and code.statuses, code
        assert all(s in grpc.StatusCode.__members__ for s in code.statuses), code
    by_code = {c.code: c for c in codes}
    assert by_code["CANNOT_BEAT"].statuses == ("FAILED_PRECONDITION",)
    assert by_code["SEAT_MISMATCH"].statuses == ("INVALID_ARGUMENT",)
    assert by_code["TABLE_MOVED"].statuses == ("UNAVAILABLE",)
    assert by_code["STALE_HAND"].areas == ("table",)


def test_no_meaning_outlives_its_code(raised: list[apidocs.Raised]) -> None:
    found = {r.code for r in raised}
    assert set(reason_codes.MEANINGS) - found == set()
    assert set(reason_codes.MEANINGS) & set(base.RULE_CODES) == set()  # one meaning per code


def test_a_new_code_without_a_meaning_fails_the_catalogue(tmp_path: Path) -> None:
    service = tmp_path / "services" / "socai_new"
    service.mkdir(parents=True)
    (tmp_path / "libs" / "socai").mkdir(parents=True)
    (service / "server.py").write_text(
        "from socai import errors\n\n"
        "def refuse() -> None:\n"
        "    raise errors.PreconditionFailed('BRAND_NEW_CODE', 'nobody wrote down what this means')\n"
    )
    raised = apidocs.scan(tmp_path)
    assert [(r.code, r.error) for r in raised] == [("BRAND_NEW_CODE", "PreconditionFailed")]
    with pytest.raises(errors.PreconditionFailed) as missing:
        apidocs.catalogue(raised)
    assert missing.value.code == "CODE_WITHOUT_MEANING" and "BRAND_NEW_CODE" in missing.value.message


def test_codes_passed_through_constants_helpers_and_choices_are_found(tmp_path: Path) -> None:
    lib = tmp_path / "libs" / "socai"
    lib.mkdir(parents=True)
    (lib / "x.py").write_text(
        "from socai import errors\n"
        "GONE = 'TABLE_MOVED'\n\n"
        "def _refused(code: str, why: str) -> errors.InvalidArgument:\n"
        "    return errors.InvalidArgument(code, why)\n\n"
        "def f(small: bool) -> None:\n"
        "    code = 'BET_TOO_SMALL' if small else 'BET_TOO_LARGE'\n"
        "    raise errors.RuleViolation(code, '')\n\n"
        "def g() -> None:\n"
        "    raise errors.Unavailable(GONE, '')\n\n"
        "def h() -> None:\n"
        "    raise _refused('CARD_FORMAT', '')\n"
    )
    found = {(r.code, r.error) for r in apidocs.scan(tmp_path)}
    assert found == {
        ("BET_TOO_SMALL", "RuleViolation"),
        ("BET_TOO_LARGE", "RuleViolation"),
        ("TABLE_MOVED", "Unavailable"),
        ("CARD_FORMAT", "InvalidArgument"),
    }


def test_the_api_guides_generated_pages_are_todays() -> None:
    out = apidocs.ROOT / "docs" / "api"
    stale = [
        name for name, text in apidocs.pages().items() if not (out / name).exists() or (out / name).read_text() != text
    ]
    assert stale == [], f"run `socai docs api`: {stale}"
    assert (out / "README.md").exists()  # the hand-written guide the pages link to
