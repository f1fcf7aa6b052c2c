"""``buf breaking`` against the last landed contract (proto/contract.binpb; issue 36).

make lint runs it: a change to proto/ that would break a client fails it. Shown on a
scratch copy of proto/ with one field of ActRequest removed: refused, naming the field.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUF = Path(sys.executable).parent / "buf"


def breaking(proto_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BUF), "breaking", "--against", str(ROOT / "proto" / "contract.binpb")],
        cwd=proto_dir,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_todays_proto_breaks_nothing_of_the_last_landed_contract() -> None:
    done = breaking(ROOT / "proto")
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_removed_field_fails_buf_breaking(tmp_path: Path) -> None:
    scratch = tmp_path / "proto"
    shutil.copytree(ROOT / "proto", scratch)
    table = scratch / "socai" / "table" / "v1" / "table.proto"
    text = table.read_text()
    act_request = re.search(r"message ActRequest \{.*?\n\}", text, re.S)
    assert act_request is not None
    without = act_request.group(0).replace("  string idempotency_key = 5;\n", "")
    assert without != act_request.group(0)
    table.write_text(text.replace(act_request.group(0), without))
    done = breaking(scratch)
    assert done.returncode != 0
    assert "ActRequest" in done.stdout and "idempotency_key" in done.stdout, done.stdout
