"""``python -m socai_settlement``: the settlement service (metrics on metrics_port_base + 2)."""

from socai.infra.service import run
from socai_settlement.app import build_app

if __name__ == "__main__":
    run("settlement", build_app)
