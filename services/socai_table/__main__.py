"""``python -m socai_table``: the table service."""

from socai.infra.service import run
from socai_table.app import build_app

if __name__ == "__main__":
    run("table", build_app)
