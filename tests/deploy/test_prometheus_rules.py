"""``deploy/prometheus/rules.yml`` evaluated by Prometheus's own rule engine.

``deploy/prometheus/promtool.sh`` builds promtool from the Go module proxy on first use (into
the git-ignored ``.cache/tools/``; a few minutes from an empty Go cache, then nothing), so this
test is never skipped: ``promtool check rules`` must accept the rules, and ``promtool test
rules`` must pass ``deploy/prometheus/rules.test.yml``, where every alert fires in one case and
stays quiet in another and every recording rule's output is checked. A failure shows
promtool's own output.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.test_deploy_artifacts import rules

REPO = Path(__file__).resolve().parents[2]
PROMETHEUS = REPO / "deploy" / "prometheus"
UNIT_TESTS = PROMETHEUS / "rules.test.yml"

BUILD_TIMEOUT_S = 1200  # measured: 6.5 minutes from empty Go caches on 2 cores


@pytest.fixture(scope="module")
def promtool() -> Path:
    built = subprocess.run(
        [str(PROMETHEUS / "promtool.sh")],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )
    assert built.returncode == 0, f"building promtool failed:\n{built.stderr}"
    path = Path(built.stdout.strip().splitlines()[-1])
    assert path.is_file(), built.stdout
    return path


def promtool_says(promtool: Path, *args: str) -> None:
    done = subprocess.run(
        [str(promtool), *args],
        cwd=PROMETHEUS,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"promtool {' '.join(args)}:\n{done.stdout}{done.stderr}"


def test_promtool_accepts_the_rules(promtool: Path) -> None:
    promtool_says(promtool, "check", "rules", "rules.yml")


def test_the_rules_pass_their_unit_tests(promtool: Path) -> None:
    promtool_says(promtool, "test", "rules", UNIT_TESTS.name)


def test_every_rule_has_unit_tests() -> None:
    """Each alert fires in some case and is expected quiet in another; each recording rule's
    output is queried."""
    document: dict[str, Any] = yaml.safe_load(UNIT_TESTS.read_text())
    fires: set[str] = set()
    quiet: set[str] = set()
    queried = ""
    for case in document["tests"]:
        for check in case.get("alert_rule_test", []):
            (fires if check.get("exp_alerts") else quiet).add(check["alertname"])
        queried += " ".join(check["expr"] for check in case.get("promql_expr_test", []))
    defined = [rule for group in rules()["groups"] for rule in group["rules"]]
    alerts = {rule["alert"] for rule in defined if "alert" in rule}
    assert alerts - fires == set(), "alerts never seen firing"
    assert alerts - quiet == set(), "alerts never expected quiet"
    records = {rule["record"] for rule in defined if "record" in rule}
    assert {record for record in records if record not in queried} == set()
