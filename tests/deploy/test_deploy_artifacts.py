"""What deploy/ holds refers only to what the code has.

* ``deploy/prometheus/rules.yml`` and ``deploy/grafana/blackjack.json``: every metric is one the
  service registers with prometheus-client (suffixes ``_total``, ``_bucket``, ... as exported),
  every label in a selector or a grouping exists on the metrics of its expression, every
  literal label value is one the code can set, every recorded series is defined.
* ``deploy/k8s``: the command lines parse with the real CLI, the processes listen where the
  probes, Services and scrape annotations point, the probe paths answer on the real ASGI apps,
  every environment variable is one the settings read and its value parses.

The rules also go through Prometheus's own engine in ``test_prometheus_rules.py`` (promtool,
built on first use: ``promtool check rules`` and the unit tests of
``deploy/prometheus/rules.test.yml``); what promtool cannot know is checked here, that every
name is one the code exports. There is no kubeconform here: for the manifests these checks are
the validation. A checker that cannot fail proves nothing, so the checkers are also fed a
misspelled copy.
"""

from __future__ import annotations

import ast
import atexit
import copy
import fnmatch
import json
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, get_args

import certifi
import httpx
import pytest
import yaml
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from prometheus_client import REGISTRY
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.engine import make_url

import blackjack.app
import blackjack.client  # (a platform's process exports its counters: the dashboard shows them)
import blackjack.http_server  # (every process serves its HTTP, and so its metrics, through it)
import blackjack.projection_worker.worker
from blackjack.cli import build_parser
from blackjack.command_handler import partitions
from blackjack.command_handler.config import HandlerConfig
from blackjack.command_handler.keys import load_audit_keys
from blackjack.domain.rejections import RejectionCode
from blackjack.messages.envelope import CommandResult
from blackjack.messages.sealing import ShoeSeal
from blackjack.projection_worker.settings import ProjectionSettings
from blackjack.projections.health import FoldHealth
from blackjack.projections.store import ProjectionStore

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
SOURCES = REPO / "services" / "blackjack"
RULES = DEPLOY / "prometheus" / "rules.yml"
SCRAPE = DEPLOY / "prometheus" / "scrape.yml"
DASHBOARD = DEPLOY / "grafana" / "blackjack.json"
K8S = DEPLOY / "k8s"

# ---- what the code exports ------------------------------------------------------------------


@dataclass(frozen=True)
class Series:
    family: str
    kind: str
    labels: frozenset[str]


def _metric_objects() -> Iterator[MetricWrapperBase]:
    """The metrics defined at module level anywhere in the service's loaded modules (the app
    and the projection worker import every module that defines one)."""
    assert (
        blackjack.app and blackjack.projection_worker.worker and blackjack.client
    )  # their metrics
    seen: set[int] = set()
    for name, module in list(sys.modules.items()):
        if name == "blackjack" or name.startswith("blackjack."):
            for value in vars(module).values():
                if isinstance(value, MetricWrapperBase) and id(value) not in seen:
                    seen.add(id(value))
                    yield value


def exported_series() -> dict[str, Series]:
    """Every series name /metrics can show, with the labels it carries."""
    series: dict[str, Series] = {}
    for metric in _metric_objects():
        [family] = metric.describe()
        # prometheus-client keeps a metric's label names in ``_labelnames`` (no public getter)
        labels = frozenset(metric._labelnames)
        suffixes = {
            "counter": ["_total", "_created"],
            "gauge": [""],
            "histogram": ["_bucket", "_count", "_sum", "_created"],
            "summary": ["", "_count", "_sum", "_created"],
        }[family.type]
        for suffix in suffixes:
            extra = {"le"} if suffix == "_bucket" else set()
            series[family.name + suffix] = Series(family.name, family.type, labels | extra)
    return series


SERIES = exported_series()
# prometheus-client's process collector, in every process of the service (Linux)
PROCESS_SERIES = ("process_start_time_seconds", "process_resident_memory_bytes")
SERIES.update({name: Series(name, "gauge", frozenset()) for name in PROCESS_SERIES})
# kube-state-metrics' view of the pods (BlackjackContainerNotStarting): exported by it, not by any
# process of the service, with the pod's namespace and name and these
KUBE_STATE_WAITING = "kube_pod_container_status_waiting_reason"
KUBE_STATE_SERIES = {
    KUBE_STATE_WAITING: Series(KUBE_STATE_WAITING, "gauge", frozenset({"container", "reason"}))
}


def _literal_labels(source: Path, metric: str) -> set[str]:
    """The string constants passed to ``<...>.METRIC.labels(...)`` in a source file."""
    values: set[str] = set()
    for node in ast.walk(ast.parse(source.read_text())):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "labels"
            and isinstance(node.func.value, ast.Attribute)
            and node.func.value.attr == metric
        ):
            values |= {str(a.value) for a in node.args if isinstance(a, ast.Constant)}
    return values


def _bucket_bounds() -> dict[str, set[str]]:
    """The ``le`` values of each histogram, from the samples the registry exports."""
    bounds: dict[str, set[str]] = {}
    for family in REGISTRY.collect():
        for sample in family.samples:
            if sample.name.endswith("_bucket") and sample.name in SERIES:
                bounds.setdefault(sample.name, set()).add(sample.labels["le"])
    return bounds


# The values a label can take, where the code enumerates them.
VALUES: dict[tuple[str, str], set[str]] = {
    ("blackjack_commands_total", "status"): set(
        get_args(CommandResult.model_fields["status"].annotation)
    ),
    ("blackjack_commands_total", "code"): {*get_args(RejectionCode), ""},
    ("blackjack_partitions", "status"): set(get_args(partitions.Status)),
    ("blackjack_transactions_total", "outcome"): _literal_labels(
        SOURCES / "command_handler" / "transactions.py", "TRANSACTIONS"
    ),
    ("blackjack_duplicate_commands_total", "told_by"): _literal_labels(
        SOURCES / "command_handler" / "transactions.py", "DUPLICATES"
    ),
    **{(name, "le"): les for name, les in _bucket_bounds().items()},
}


def target_labels() -> set[str]:
    """Labels the scrape adds, in both set-ups: scrape.yml's relabelling (plus job, instance)
    and a PodMonitor of the Prometheus operator (its documented target labels)."""
    [job] = yaml.safe_load(SCRAPE.read_text())["scrape_configs"]
    relabelled = {r["target_label"] for r in job["relabel_configs"] if "target_label" in r}
    from_scrape_yml = {label for label in relabelled if not label.startswith("__")}
    pod_monitor = {"namespace", "pod", "container", "endpoint", "job", "instance"}
    return (from_scrape_yml | {"job", "instance"}) & pod_monitor


TARGET = target_labels()

# ---- PromQL, enough of it to find every metric, label and function ----------------------------

_TOKEN = re.compile(
    r"""
    (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
   |(?P<range>\[[^\]]*\])
   |(?P<duration>\d+(?:ms|[smhdwy])(?![A-Za-z0-9_]))
   |(?P<number>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
   |(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)
   |(?P<op>=~|!~|!=|==|>=|<=|[-+*/%^<>=(){},])
   |(?P<space>\s+)
    """,
    re.VERBOSE,
)
_AGGREGATIONS = "sum min max avg group stddev stdvar count count_values bottomk topk quantile"
_FUNCTIONS = """abs absent absent_over_time avg_over_time ceil changes clamp clamp_max clamp_min
    count_over_time delta deriv floor histogram_quantile holt_winters idelta increase irate
    label_join label_replace last_over_time max_over_time min_over_time predict_linear rate
    resets round scalar sort sort_desc sum_over_time time timestamp vector"""
FUNCTIONS = {*_AGGREGATIONS.split(), *_FUNCTIONS.split()}
GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}
KEYWORDS = {"and", "or", "unless", "bool", "inf", "nan", "offset"}


@dataclass
class Parsed:
    selectors: list[tuple[str, list[tuple[str, str, str]]]] = field(default_factory=list)
    grouping: list[tuple[str, list[str]]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def parse(expr: str) -> Parsed:
    tokens: list[tuple[str, str]] = []
    position = 0
    found = Parsed()
    while position < len(expr):
        match = _TOKEN.match(expr, position)
        if match is None:
            found.problems.append(f"cannot read {expr[position:]!r}")
            return found
        position = match.end()
        if match.lastgroup != "space":
            tokens.append((match.lastgroup or "", match.group()))
    i = 0
    while i < len(tokens):
        kind, text = tokens[i]
        following = tokens[i + 1][1] if i + 1 < len(tokens) else ""
        if kind != "name":
            if text == "{":
                found.problems.append("a selector without a metric name")
            i += 1
            continue
        if text in GROUPING:
            if following != "(":
                found.problems.append(f"{text} without a label list")
                i += 1
                continue
            end = next(j for j in range(i + 2, len(tokens)) if tokens[j][1] == ")")
            labels = [t for k, t in tokens[i + 2 : end] if k == "name"]
            found.grouping.append((text, labels))
            i = end + 1
        elif text in FUNCTIONS or text.lower() in KEYWORDS:
            i += 1
        elif following == "(":
            found.problems.append(f"unknown function {text}()")
            i += 1
        else:
            matchers: list[tuple[str, str, str]] = []
            i += 1
            if following == "{":
                end = next(j for j in range(i + 1, len(tokens)) if tokens[j][1] == "}")
                body = [t for t in tokens[i + 1 : end] if t[1] != ","]
                for j in range(0, len(body), 3):
                    (_, label), (_, op), (_, value) = body[j : j + 3]
                    matchers.append((label, op, value[1:-1]))
                i = end + 1
            found.selectors.append((text, matchers))
    return found


def recorded_labels(expr: str) -> frozenset[str]:
    """The labels a recording rule's series keep: its outermost ``by (...)``."""
    by = [labels for keyword, labels in parse(expr).grouping if keyword == "by"]
    labels = set(by[0]) if by else set()
    if expr.lstrip().startswith("histogram_quantile"):
        labels.discard("le")
    return frozenset(labels)


def check_expr(expr: str, known: Mapping[str, Series], where: str) -> list[str]:
    """Everything in ``expr`` that the code does not export."""
    parsed = parse(expr)
    problems = [f"{where}: {p}" for p in parsed.problems]
    available = set(TARGET)
    for metric, matchers in parsed.selectors:
        series = known.get(metric)
        if series is None:
            problems.append(f"{where}: no such metric {metric}")
            continue
        available |= series.labels
        for label, op, value in matchers:
            if label not in series.labels | TARGET:
                problems.append(f"{where}: {metric} has no label {label!r}")
            allowed = VALUES.get((metric, label))
            if allowed is not None and op in ("=", "!=") and value not in allowed:
                problems.append(f"{where}: {metric}{{{label}}} is never {value!r}")
    for keyword, labels in parsed.grouping:
        for label in labels:
            if label not in available:
                problems.append(f"{where}: {keyword} ({label}) is on none of its metrics")
    return problems


def template_labels(text: str) -> set[str]:
    return set(re.findall(r"\$labels\.([A-Za-z_][A-Za-z0-9_]*)", text))


# ---- the rules --------------------------------------------------------------------------------

SEVERITIES = {"critical", "warning", "info"}
DURATION = re.compile(r"^(\d+[smhdw])+$")


def check_rules(document: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    known = SERIES | KUBE_STATE_SERIES
    groups = document["groups"]
    names = [g["name"] for g in groups]
    if len(set(names)) != len(names):
        problems.append(f"group names repeat: {names}")
    alerts: list[str] = []
    for group in groups:
        for rule in group["rules"]:
            if "record" in rule:  # usable by the rules after it (and by dashboards)
                record = rule["record"]
                if not re.fullmatch(r"[a-z_]+:[a-z0-9_]+:[a-z0-9_]+", record):
                    problems.append(f"{record}: not level:metric:operations")
                where = f"record {record}"
                problems += check_expr(rule["expr"], known, where)
                known[record] = Series(record, "recorded", recorded_labels(rule["expr"]))
                continue
            name = rule.get("alert", "?")
            alerts.append(name)
            where = f"alert {name}"
            problems += check_expr(rule["expr"], known, where)
            if rule.get("labels", {}).get("severity") not in SEVERITIES:
                problems.append(f"{where}: severity not one of {sorted(SEVERITIES)}")
            if "for" in rule and not DURATION.match(str(rule["for"])):
                problems.append(f"{where}: bad duration {rule['for']!r}")
            annotations = rule.get("annotations", {})
            if not annotations.get("summary") or not annotations.get("description"):
                problems.append(f"{where}: needs a summary and a description")
            parsed = parse(rule["expr"])
            available = set(TARGET)
            for metric, _ in parsed.selectors:
                available |= known[metric].labels if metric in known else set()
            for label in template_labels(json.dumps(annotations)) - available:
                problems.append(f"{where}: $labels.{label} is on none of its metrics")
    if len(set(alerts)) != len(alerts):
        problems.append("alert names repeat")
    return problems


def rules() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(RULES.read_text())
    return document


def recorded() -> dict[str, Series]:
    known = {}
    for group in rules()["groups"]:
        for rule in group["rules"]:
            if "record" in rule:
                known[rule["record"]] = Series(
                    rule["record"], "recorded", recorded_labels(rule["expr"])
                )
    return known


def test_the_rules_use_only_exported_metrics_and_labels() -> None:
    assert check_rules(rules()) == []


def test_the_rules_alert_on_what_an_operator_needs() -> None:
    alerts = {r["alert"]: r for g in rules()["groups"] for r in g["rules"] if "alert" in r}
    wanted = {
        "BlackjackPartitionsNotServing": "blackjack_partitions",
        "BlackjackCommandRejectionSpike": "blackjack:command_rejections:rate5m",
        "BlackjackTransactionsAborted": "blackjack_transactions_total",
        "BlackjackProjectionLagGrowing": "blackjack:projection_lag:max",
        "BlackjackProjectionStuck": "blackjack_projection_stuck_offset",
        "BlackjackProjectionSplitStore": "blackjack_projection_split_partitions",
        "BlackjackRebuildSlow": "blackjack_rebuild_seconds_count",
        # nothing else sees the brokers away (partitions stay ready, backlog and lag stale)
        "BlackjackKafkaUnreachable": "blackjack_kafka_answered_timestamp_seconds",
        # ... nor a process that never reaches them at its start: it has no answer's series
        "BlackjackStartStalled": "blackjack_start_waiting_since_timestamp_seconds",
        # the clock's timers: tables wait while it cannot send them
        "BlackjackTimerSendsFailing": "blackjack_timer_send_failures_total",
        # refused before the app: the query API's request counter never sees them
        "BlackjackHttpBusy": "blackjack_http_connections_refused_total",
        # a refused money step's alert clears after 15 minutes; the money stays in transit
        "BlackjackMoneyInTransit": "blackjack_money_in_transit_since_timestamp_seconds",
    }
    for alert, metric in wanted.items():
        assert alert in alerts, alert
        assert metric in {m for m, _ in parse(alerts[alert]["expr"]).selectors}, alert
    # the rejection spike is by reason
    assert "code" in template_labels(json.dumps(alerts["BlackjackCommandRejectionSpike"]))


def test_the_rules_checker_finds_a_misspelled_metric_label_or_value() -> None:
    def first_alert(document: dict[str, Any]) -> dict[str, Any]:
        rule: dict[str, Any] = next(
            r for g in document["groups"] for r in g["rules"] if "alert" in r
        )
        return rule

    for wrong, expected in [
        ("blackjack_comands_total", "no such metric blackjack_comands_total"),
        ('blackjack_commands_total{reason="malformed"}', "has no label 'reason'"),
        ('blackjack_commands_total{status="refused"}', "is never 'refused'"),
        ("sum by (pood) (blackjack_streams)", "by (pood) is on none"),
        ("blackjack_transaction_seconds_total", "no such metric"),
        ('blackjack_rebuild_seconds_bucket{le="60"}', "is never '60'"),
        ("sum(rat(blackjack_events_total[5m]))", "unknown function rat()"),
        ("blackjack:no_such:record > 1", "no such metric blackjack:no_such:record"),
    ]:
        document = copy.deepcopy(rules())
        first_alert(document)["expr"] = wrong
        problems = check_rules(document)
        assert any(expected in p for p in problems), (wrong, problems)
    document = copy.deepcopy(rules())
    first_alert(document)["annotations"]["summary"] = "{{ $labels.podd }} is down"
    assert any("$labels.podd" in p for p in check_rules(document))


def test_the_metric_catalogue_is_complete() -> None:
    collected = {f.name for f in REGISTRY.collect()}
    families = {name for name in collected if name.startswith("blackjack")}
    assert {s.family for s in SERIES.values() if s.family.startswith("blackjack")} == families
    assert set(PROCESS_SERIES) <= collected  # the process collector is there to alert on
    assert SERIES["blackjack_commands_total"].labels == {"type", "status", "code"}
    assert SERIES["blackjack_rebuild_seconds_bucket"].labels == {"le"}
    assert "60.0" in VALUES[("blackjack_rebuild_seconds_bucket", "le")]
    assert VALUES[("blackjack_transactions_total", "outcome")] == {"committed", "aborted", "fenced"}
    # copies refused by their id and by the round they name (stale_command) alike
    assert VALUES[("blackjack_duplicate_commands_total", "told_by")] == {"id", "round"}


# ---- the dashboard ------------------------------------------------------------------------------

GRAFANA_BUILTINS = {"__rate_interval", "__interval", "__range"}


def dashboard() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return document


def check_dashboard(document: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    known = {**SERIES, **recorded()}
    variables = {v["name"] for v in document["templating"]["list"]}
    for variable in document["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]["query"]
            metric, label = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", query).groups()  # type: ignore[union-attr]
            if metric not in known or label not in known[metric].labels | TARGET:
                problems.append(f"variable {variable['name']}: {query}")
    ids = [p["id"] for p in document["panels"]]
    if len(set(ids)) != len(ids):
        problems.append("panel ids repeat")
    cells: dict[tuple[int, int], int] = {}
    for panel in document["panels"]:
        where = f"panel {panel['id']} {panel['title']!r}"
        grid = panel["gridPos"]
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                if (x, y) in cells:
                    problems.append(f"{where} overlaps panel {cells[(x, y)]}")
                cells[(x, y)] = panel["id"]
        if grid["x"] + grid["w"] > 24:
            problems.append(f"{where} is wider than the dashboard")
        if panel["type"] == "row":
            continue
        if panel["datasource"]["uid"] != "${datasource}":
            problems.append(f"{where}: not on the datasource variable")
        if not panel.get("targets"):
            problems.append(f"{where}: no query")
        for target in panel.get("targets", []):
            expr = target["expr"]
            for used in re.findall(r"\$\{?(\w+)", expr):
                if used not in variables | GRAFANA_BUILTINS:
                    problems.append(f"{where}: undefined variable ${used}")
            problems += check_expr(expr, known, where)
            legend = target.get("legendFormat", "")
            available = set(TARGET)
            for metric, _ in parse(expr).selectors:
                available |= known[metric].labels if metric in known else set()
            for label in set(re.findall(r"\{\{\s*(\w+)\s*\}\}", legend)) - available:
                problems.append(f"{where}: legend shows {label}, on none of its metrics")
    return problems


def test_the_dashboard_uses_only_exported_metrics_and_labels() -> None:
    document = dashboard()
    assert document["uid"] and document["title"]
    assert check_dashboard(document) == []
    shown = {
        m
        for p in document["panels"]
        for t in p.get("targets", [])
        for m, _ in parse(t["expr"]).selectors
    }
    # every exported family (or one of its series) has a panel
    assert {SERIES[m].family for m in shown if m in SERIES} == {s.family for s in SERIES.values()}
    # the copies told by their id and those told by their round apart
    [duplicates] = [
        t
        for p in document["panels"]
        for t in p.get("targets", [])
        if "blackjack_duplicate_commands_total" in t["expr"]
    ]
    assert ["told_by"] in [labels for _, labels in parse(duplicates["expr"]).grouping]


def test_the_dashboard_checker_finds_a_misspelled_metric_or_variable() -> None:
    for wrong, expected in [
        ("sum(blackjack_projection_lagg)", "no such metric blackjack_projection_lagg"),
        ('sum(blackjack_streams{namespace=~"$namespaces"})', "undefined variable $namespaces"),
        ("sum by (partiton) (blackjack_projection_lag)", "by (partiton)"),
    ]:
        document = dashboard()
        panel = next(p for p in document["panels"] if p["type"] != "row")
        panel["targets"][0]["expr"] = wrong
        problems = check_dashboard(document)
        assert any(expected in p for p in problems), (wrong, problems)


# ---- Kubernetes ----------------------------------------------------------------------------------


def _env_read_by_the_code() -> set[str]:
    """Environment variable names the service reads: string constants that are exactly such a
    name anywhere in its code (docstrings left out, where names are only mentioned)."""
    names = set()
    for path in SOURCES.rglob("*.py"):
        tree = ast.parse(path.read_text())
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
                and re.fullmatch(r"(BLACKJACK|KAFKA)_[A-Z0-9_]+", node.value)
            ):
                names.add(node.value)
    return names


ENV_READ = _env_read_by_the_code()
READ_BY_LIBRARIES = {
    "SQLITE_TMPDIR",  # SQLite's: where the handler's cold tables spill
    "PGSSLROOTCERT",  # asyncpg's: the CA the database URL's ?ssl=verify-full checks against
}


def kustomized() -> list[dict[str, Any]]:
    """The resources ``kubectl apply -k deploy/k8s`` creates (namespace and common labels
    applied as kustomize does)."""
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    pairs: dict[str, str] = {}
    for entry in kustomization.get("labels", []):
        pairs.update(entry["pairs"])
    resources = []
    for name in kustomization["resources"]:
        for document in yaml.safe_load_all((K8S / name).read_text()):
            if not document:
                continue
            document["metadata"]["namespace"] = kustomization["namespace"]
            document["metadata"].setdefault("labels", {}).update(pairs)
            template = document.get("spec", {}).get("template")
            if template is not None:
                template["metadata"].setdefault("labels", {}).update(pairs)
            resources.append(document)
    return resources


def of_kind(kind: str) -> list[dict[str, Any]]:
    return [r for r in kustomized() if r["kind"] == kind]


def workloads() -> list[dict[str, Any]]:
    return of_kind("Deployment") + of_kind("StatefulSet")


def config_map() -> dict[str, str]:
    [found] = of_kind("ConfigMap")
    data: dict[str, str] = found["data"]
    return data


SHOE_KEY = ShoeSeal.new_key_hex()
PLACEHOLDERS = {  # what the Secret holds in production, in a form the settings accept
    "BLACKJACK_SHOE_KEY": SHOE_KEY,
    "BLACKJACK_AUDIT_KEY": ShoeSeal.from_hex(SHOE_KEY).audit_key_hex(),
    "BLACKJACK_DB_URL": (
        "postgresql+asyncpg://blackjack:secret@db.internal:5432/blackjack?ssl=verify-full"
    ),
    "BLACKJACK_KAFKA_SASL_PASSWORD_HANDLER": "the handlers' principal's password",
    "BLACKJACK_KAFKA_SASL_PASSWORD_PROJECTIONS": "the workers' principal's password",
    "BLACKJACK_KAFKA_SASL_PASSWORD_AUDIT": "the audit's principal's password",
    "BLACKJACK_API_TOKENS": "the-gateway-s-bearer-token-of-32-characters-or-more",
    "BLACKJACK_API_PLAYER_KEYS": Ed25519PrivateKey.generate()
    .public_key()
    .public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    .decode(),
    "BLACKJACK_API_PLAYER_SECRETS": "the-platform-s-hs256-secret-of-32-characters-or-more",
}
OPTIONAL_SECRETS = {  # the players' keys: the operator's token alone reads everything
    "BLACKJACK_API_PLAYER_KEYS",
    "BLACKJACK_API_PLAYER_SECRETS",
}
SHOE_KEY_FILE = Path(tempfile.mkdtemp(prefix="blackjack-deploy-")) / "shoe.key"
SHOE_KEY_FILE.write_text(SHOE_KEY + "\n")
atexit.register(shutil.rmtree, SHOE_KEY_FILE.parent, True)
MOUNTED_FILES = {  # a file the pod gets from a mounted Secret, here a real file of that kind
    "BLACKJACK_KAFKA_SSL_CAFILE": certifi.where(),
    "PGSSLROOTCERT": certifi.where(),
    "BLACKJACK_SHOE_KEY_FILE": str(SHOE_KEY_FILE),
}


def container_env(container: dict[str, Any]) -> dict[str, str]:
    """The environment the container gets: its ConfigMaps, then its own entries (a secret or a
    field reference replaced by a value of the right form)."""
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        assert source["configMapRef"]["name"] == "blackjack-config"
        env.update(config_map())
    for entry in container.get("env", []):
        if "value" in entry:
            env[entry["name"]] = entry["value"]
        elif "secretKeyRef" in entry["valueFrom"]:
            env[entry["name"]] = PLACEHOLDERS[entry["valueFrom"]["secretKeyRef"]["key"]]
        else:
            assert entry["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
            env[entry["name"]] = "pod-0"
    for name, stand_in in MOUNTED_FILES.items():
        if name in env:
            mounted = [m["mountPath"] for m in container.get("volumeMounts", [])]
            assert any(env[name].startswith(f"{path}/") for path in mounted), (name, mounted)
            env[name] = stand_in
    # a pod that reaches the database checks its certificate (the runbook's ?ssl=verify-full)
    assert ("BLACKJACK_DB_URL" in env) == ("PGSSLROOTCERT" in env), sorted(env)
    return env


def the_container(workload: dict[str, Any]) -> dict[str, Any]:
    [container] = workload["spec"]["template"]["spec"]["containers"]
    found: dict[str, Any] = container
    return found


def http_port(container: dict[str, Any]) -> int:
    [port] = [p["containerPort"] for p in container["ports"] if p["name"] == "http"]
    return int(port)


@pytest.fixture
def parsed_args(monkeypatch: pytest.MonkeyPatch) -> Any:
    def parse_for(container: dict[str, Any]) -> Any:
        """The container's command line as the real CLI reads it, under its environment
        (argparse defaults come from the environment)."""
        assert container["command"] == ["blackjack"]
        env = container_env(container)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        return build_parser().parse_args([str(a) for a in container["args"]]), env

    return parse_for


def listening(args: Any) -> tuple[str, int]:
    if args.command == "serve":
        return args.host, args.port
    assert args.command == "projections" and args.projections_command == "run", args
    host, _, port = args.http.rpartition(":")  # as projection_worker/cli.py splits it
    return host, int(port)


def served_app(args: Any, env: dict[str, str]) -> Any:
    """The ASGI app the container's process serves, built by the same code."""
    if args.command == "serve":
        config = HandlerConfig.from_env(env)
        projections = None if args.no_projections else blackjack.app.projection_settings(config)
        return blackjack.app.build_app(config, projections).app
    settings = ProjectionSettings.from_env(env)
    return blackjack.projection_worker.worker.http_app(
        ProjectionStore(settings.db_url), FoldHealth(settings.stuck_after), settings.api_tokens
    )


def test_every_environment_variable_is_one_the_code_reads() -> None:
    assert {"BLACKJACK_SHOE_KEY", "BLACKJACK_DB_URL", "BLACKJACK_PROJECTION_STUCK_AFTER"} <= (
        ENV_READ
    )
    for name in config_map():
        assert name in ENV_READ, f"ConfigMap: nothing reads {name}"
    for workload in workloads():
        for entry in the_container(workload).get("env", []):
            known = ENV_READ | READ_BY_LIBRARIES
            assert entry["name"] in known, f"{workload['metadata']['name']}: {entry['name']}"
            secret = entry.get("valueFrom", {}).get("secretKeyRef")
            if secret is not None:  # only a setting the code can do without may be optional
                optional = {"optional": True} if entry["name"] in OPTIONAL_SECRETS else {}
                key = secret["key"]  # the setting's name; a Kafka password's names its principal
                assert key == entry["name"] or (
                    entry["name"] == "BLACKJACK_KAFKA_SASL_PASSWORD"
                    and key.startswith("BLACKJACK_KAFKA_SASL_PASSWORD_")
                )
                assert secret == {"name": "blackjack-secrets", "key": key, **optional}


def test_each_component_reaches_kafka_as_its_own_principal() -> None:
    """docs/kafka.md gives the handlers, the workers and the audit their own ACLs: only the
    handlers write events and read snapshots, and the audit, which holds the shoe key, may not
    write commands (with the key and the handlers' rights it could sign a money step)."""
    job = yaml.safe_load((K8S / "audit-job.yaml").read_text())
    principals = {}
    for workload in [*workloads(), job]:
        env = container_env(the_container(workload))
        assert env["BLACKJACK_KAFKA_SECURITY_PROTOCOL"].startswith("SASL_")
        component = workload["metadata"]["name"]
        principals[component] = env["BLACKJACK_KAFKA_SASL_USERNAME"]
        secrets = {
            e["name"]: e["valueFrom"]["secretKeyRef"]["key"]
            for e in the_container(workload)["env"]
            if "secretKeyRef" in e.get("valueFrom", {})
        }
        suffix = principals[component].removeprefix("blackjack-").upper()
        assert secrets["BLACKJACK_KAFKA_SASL_PASSWORD"] == f"BLACKJACK_KAFKA_SASL_PASSWORD_{suffix}"
    assert "BLACKJACK_KAFKA_SASL_USERNAME" not in config_map()
    assert principals == {
        "blackjack-handler": "blackjack-handler",
        "blackjack-projections": "blackjack-projections",
        "blackjack-audit": "blackjack-audit",
    }


def test_the_shoe_key_is_a_file_of_its_own_secret_mounted_in_the_handlers_alone() -> None:
    """Not an environment variable (a process's children, ``/proc/<pid>/environ`` and a
    crash report carry those), nor in the Secret every other pod reads from."""
    job = yaml.safe_load((K8S / "audit-job.yaml").read_text())
    holders = []
    for workload in [*workloads(), job]:
        name = workload["metadata"]["name"]
        container = the_container(workload)
        keys_read = {
            e["valueFrom"]["secretKeyRef"]["key"]
            for e in container.get("env", [])
            if "secretKeyRef" in e.get("valueFrom", {})
        }
        assert "BLACKJACK_SHOE_KEY" not in keys_read, name
        volumes = {
            v["name"]: v["secret"]
            for v in workload["spec"]["template"]["spec"].get("volumes", [])
            if "secret" in v
        }
        if any(secret["secretName"] == "blackjack-shoe-key" for secret in volumes.values()):
            holders.append(name)
            [mount] = [
                m
                for m in container["volumeMounts"]
                if volumes.get(m["name"], {}).get("secretName") == "blackjack-shoe-key"
            ]
            assert mount["readOnly"], name
            [key_file] = [
                e["value"] for e in container["env"] if e["name"] == "BLACKJACK_SHOE_KEY_FILE"
            ]
            assert PurePosixPath(key_file).parent == PurePosixPath(mount["mountPath"]), name
            pod = workload["spec"]["template"]["spec"]["securityContext"]
            secret = volumes[mount["name"]]
            # the handler's group reads it, no one else
            assert secret["defaultMode"] == 0o440 and pod["fsGroup"] == pod["runAsGroup"]
    assert holders == ["blackjack-handler"]


def test_the_env_checker_finds_a_misspelled_name() -> None:
    assert "BLACKJACK_PROJECTION_STUCK_AFTR" not in ENV_READ
    assert "BLACKJACK_HTTP_PORT" in ENV_READ  # read by the CLI, not only mentioned


async def test_probes_and_scrapes_point_where_the_processes_listen(parsed_args: Any) -> None:
    kinds = set()
    for workload in workloads():
        name = workload["metadata"]["name"]
        container = the_container(workload)
        args, env = parsed_args(container)
        kinds.add((args.command, getattr(args, "no_projections", None)))
        # the settings accept every value the manifests give
        if "BLACKJACK_SHOE_KEY_FILE" in env:
            assert HandlerConfig.from_env(env).shoe_key_hex == SHOE_KEY
        ProjectionSettings.from_env(env)
        host, port = listening(args)
        assert host == "0.0.0.0", f"{name} listens on {host} only"
        assert port == http_port(container), name
        template = workload["spec"]["template"]
        annotations = template["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true"
        assert int(annotations["prometheus.io/port"]) == port, name
        app = served_app(args, env)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://pod") as http:
            metrics = await http.get(annotations["prometheus.io/path"])
            assert metrics.status_code == 200 and "blackjack_" in metrics.text, name
            for probe, path, statuses in [
                ("startupProbe", "/healthz", {200}),
                ("livenessProbe", "/healthz", {200}),
                ("readinessProbe", "/readyz", {200, 503}),
            ]:
                get = container[probe]["httpGet"]
                assert get["path"] == path, (name, probe)
                assert get["port"] in ("http", port), (name, probe)
                answer = await http.get(get["path"])
                assert answer.status_code in statuses, (name, probe, answer.status_code)
                assert answer.headers["content-type"] == "application/json"
        if "BLACKJACK_PROJECTION_INSTANCE" in env:  # static membership wants stable names
            assert workload["kind"] == "StatefulSet", name
    assert kinds == {("serve", True), ("projections", None)}


def test_services_and_monitors_select_the_pods() -> None:
    pods = {
        w["metadata"]["name"]: (w["spec"]["template"]["metadata"]["labels"], the_container(w))
        for w in workloads()
    }

    def selected(selector: dict[str, str]) -> list[str]:
        return [n for n, (labels, _) in pods.items() if selector.items() <= labels.items()]

    for workload in workloads():
        selector = workload["spec"]["selector"]["matchLabels"]
        assert selected(selector) == [workload["metadata"]["name"]]
        if workload["kind"] == "StatefulSet":
            governing = [
                s
                for s in of_kind("Service")
                if s["metadata"]["name"] == workload["spec"]["serviceName"]
            ]
            assert governing and governing[0]["spec"]["clusterIP"] == "None"
    for svc in of_kind("Service"):
        targets = selected(svc["spec"]["selector"])
        assert targets, svc["metadata"]["name"]
        for port in svc["spec"]["ports"]:
            for target in targets:
                names = {p["name"] for p in pods[target][1]["ports"]}
                assert port["targetPort"] in names, (svc["metadata"]["name"], target)
    query_api = next(
        s for s in of_kind("Service") if s["metadata"]["name"] == "blackjack-query-api"
    )
    assert selected(query_api["spec"]["selector"]) == ["blackjack-projections"]
    for budget in of_kind("PodDisruptionBudget"):
        assert len(selected(budget["spec"]["selector"]["matchLabels"])) == 1
    # the PodMonitor (applied apart) and scrape.yml keep every blackjack pod, and only those
    monitor = yaml.safe_load((K8S / "podmonitor.yaml").read_text())
    assert sorted(selected(monitor["spec"]["selector"]["matchLabels"])) == sorted(pods)
    # a PodMonitor selects the pods of its own namespace only
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert monitor["metadata"]["namespace"] == kustomization["namespace"]
    endpoint = monitor["spec"]["podMetricsEndpoints"][0]
    assert endpoint["port"] == "http" and endpoint["path"] == "/metrics"
    [job] = yaml.safe_load(SCRAPE.read_text())["scrape_configs"]
    keep = job["relabel_configs"][0]
    sanitized = keep["source_labels"][0].removeprefix("__meta_kubernetes_pod_label_")
    for labels, _ in pods.values():
        # Prometheus turns every character of a label name that is not [a-zA-Z0-9_] into _
        [value] = [v for k, v in labels.items() if re.sub(r"\W", "_", k) == sanitized]
        assert re.fullmatch(keep["regex"], value)


def selects(selector: dict[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether a label selector (``matchLabels``, ``matchExpressions`` with ``In``) selects."""
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for expression in selector.get("matchExpressions", []):
        assert expression["operator"] == "In", expression  # the only one the manifests use
        if labels.get(expression["key"]) not in expression["values"]:
            return False
    return True


@dataclass(frozen=True)
class Allowed:
    """What the network policies selecting one pod let through, one direction."""

    ports: set[tuple[str, int | str]] = field(default_factory=set)
    peers: dict[tuple[str, int | str], list[dict[str, Any]]] = field(default_factory=dict)

    def add(self, rule: dict[str, Any], peers_key: str) -> None:
        for port in rule["ports"]:  # a rule without ports would open every port
            key = (port["protocol"], port["port"])
            self.ports.add(key)
            # a rule without peers reaches anyone (the database outside the cluster)
            self.peers.setdefault(key, []).extend(rule.get(peers_key, [{}]))


def allowed(pod_labels: Mapping[str, str]) -> tuple[Allowed, Allowed, set[str]]:
    """Ingress and egress the namespace's policies allow a pod, and the directions isolated."""
    ingress, egress, isolated = Allowed(), Allowed(), set()
    for policy in of_kind("NetworkPolicy"):
        spec = policy["spec"]
        if not selects(spec["podSelector"], pod_labels):
            continue
        isolated |= set(spec["policyTypes"])
        for rule in spec.get("ingress", []):
            ingress.add(rule, "from")
        for rule in spec.get("egress", []):
            egress.add(rule, "to")
    return ingress, egress, isolated


def namespace_of(peers: list[dict[str, Any]]) -> set[str]:
    return {p["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"] for p in peers}


def test_network_policies_let_each_pod_reach_what_it_uses_and_no_more() -> None:
    """Each pod takes its metrics' scrape from Prometheus and, for the query API's pods only,
    requests from the gateway; it reaches DNS, the brokers of BLACKJACK_KAFKA_BOOTSTRAP and,
    when it holds the database's URL, PostgreSQL's port; nothing else in or out."""
    job = yaml.safe_load((K8S / "audit-job.yaml").read_text())
    bootstrap = [
        address.rpartition(":") for address in config_map()["BLACKJACK_KAFKA_BOOTSTRAP"].split(",")
    ]
    kafka_ports = {("TCP", int(port)) for _, _, port in bootstrap}
    # kafka-0.kafka.kafka.svc: a headless Service's pod, in the namespace after the Service's
    kafka_namespaces = {host.split(".")[2] for host, _, _ in bootstrap}
    dns = {("UDP", 53), ("TCP", 53)}
    database_port = make_url(PLACEHOLDERS["BLACKJACK_DB_URL"]).port
    assert database_port is not None
    client_facing = {"blackjack-query-api": "gateway"}
    for workload in [*workloads(), job]:
        name = workload["metadata"]["name"]
        labels = workload["spec"]["template"]["metadata"]["labels"]
        ingress, egress, isolated = allowed(labels)
        assert isolated == {"Ingress", "Egress"}, name
        container = the_container(workload)
        expected_out = dns | kafka_ports
        if "BLACKJACK_DB_URL" in container_env(container):
            expected_out |= {("TCP", database_port)}
        assert egress.ports == expected_out, name
        for port in kafka_ports:
            assert namespace_of(egress.peers[port]) == kafka_namespaces, name
        assert namespace_of(egress.peers[("UDP", 53)]) == {"kube-system"}, name
        # a named port the pod does not have lets nothing in (the audit Job serves nothing)
        served = {p["name"] for p in container.get("ports", [])}
        assert {port for _, port in ingress.ports} & served == served, name
        if not served:
            continue
        assert ingress.ports == {("TCP", "http")}, name
        sources = {"monitoring"}
        for svc in of_kind("Service"):
            if svc["metadata"]["name"] in client_facing and selects(
                {"matchLabels": svc["spec"]["selector"]}, labels
            ):
                sources.add(client_facing[svc["metadata"]["name"]])
        assert namespace_of(ingress.peers[("TCP", "http")]) == sources, name


# A process's own stop on SIGTERM, at most: a handler's transactions get 10 s
# (CommandHandler.stop) before they are aborted, then it leaves its group and closes its stores;
# measured 2.5-13.5 s for a handler (mostly the interpreter's last garbage collection, at load
# average 12-17 on 2 cores) and 3.5-4.6 s for a worker (docs/operations.md, "Probes").
OWN_STOP_S = 15


def test_pods_behind_a_client_service_keep_answering_until_their_endpoint_is_removed() -> None:
    """A Service keeps sending a deleted pod requests until the endpoint's removal reaches
    every node; a worker closes its port within a second of SIGTERM, so the pods of a Service
    that clients call (the query API's) wait in preStop before they are signalled, and the
    grace period covers that wait and the process's own stop."""
    client_facing = {
        "blackjack-query-api",  # the handlers' Service is for their metrics and docs only
    }
    pods = {w["metadata"]["name"]: w for w in workloads()}
    for svc in of_kind("Service"):
        if svc["metadata"]["name"] not in client_facing:
            continue
        selector = svc["spec"]["selector"]
        behind = [
            w
            for w in pods.values()
            if selector.items() <= w["spec"]["template"]["metadata"]["labels"].items()
        ]
        assert behind, svc["metadata"]["name"]
        for workload in behind:
            name = workload["metadata"]["name"]
            pre_stop = the_container(workload).get("lifecycle", {}).get("preStop")
            assert pre_stop is not None, f"{name}: no preStop wait before SIGTERM"
            command = pre_stop["exec"]["command"]
            assert command[0] == "sleep" and len(command) == 2, (name, command)
            waits = int(command[1])
            assert 5 <= waits <= 15, (name, waits)
            grace = workload["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
            assert grace >= waits + OWN_STOP_S, (name, grace, waits)
    for workload in pods.values():  # every pod: its own stop before the SIGKILL
        grace = workload["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        assert grace >= OWN_STOP_S, workload["metadata"]["name"]


def test_the_audit_job_runs_the_audit_with_its_key_and_the_database(parsed_args: Any) -> None:
    job = yaml.safe_load((K8S / "audit-job.yaml").read_text())
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert job["kind"] == "Job" and "audit-job.yaml" not in kustomization["resources"]
    assert job["metadata"]["namespace"] == kustomization["namespace"]
    container = the_container(job)
    args, env = parsed_args(container)
    assert args.command == "audit"
    assert "BLACKJACK_SHOE_KEY" not in env  # the master key yields the money steps' signing key
    [key] = load_audit_keys(env)  # the auditor's key opens the committed shoes
    assert ShoeSeal.for_auditor(key).audit_key_hex() == key
    ProjectionSettings.from_env(env)
    secrets = {
        e["valueFrom"]["secretKeyRef"]["key"]
        for e in container["env"]
        if "secretKeyRef" in e.get("valueFrom", {})
    }
    # it serves no query API, and has a principal of its own
    assert secrets == {
        "BLACKJACK_AUDIT_KEY",
        "BLACKJACK_DB_URL",
        "BLACKJACK_KAFKA_SASL_PASSWORD_AUDIT",
    }
    for name in env:
        assert name in ENV_READ | READ_BY_LIBRARIES, name
    [image] = kustomization["images"]  # the same image the kustomized workloads run
    assert container["image"] == f"{image['newName']}:{image['newTag']}"


# ---- Docker Compose ------------------------------------------------------------------------------

COMPOSE = DEPLOY / "docker" / "compose.yml"


async def test_the_compose_file_runs_what_the_code_serves(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    document = yaml.safe_load(COMPOSE.read_text())
    assert 'ENTRYPOINT ["blackjack"]' in (DEPLOY / "docker" / "Dockerfile").read_text()
    ours = {
        name: svc
        for name, svc in document["services"].items()
        if svc.get("image", "").startswith("blackjack-server")
    }
    assert set(ours) == {"handler", "projections"}
    for name, svc in ours.items():
        assert svc["build"]["dockerfile"] == "deploy/docker/Dockerfile"
        assert (COMPOSE.parent / svc["build"]["context"] / svc["build"]["dockerfile"]).exists()
        env = {key: str(value) for key, value in svc["environment"].items()}
        for key in env:
            assert key in ENV_READ, f"{name}: nothing reads {key}"
        if "BLACKJACK_SHOE_KEY_FILE" in env:  # created on first start; here in a scratch dir
            env["BLACKJACK_SHOE_KEY_FILE"] = str(tmp_path / "keys" / "shoe.key")
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        args = build_parser().parse_args(svc["command"])
        host, port = listening(args)
        assert host == "0.0.0.0", name
        assert port in {int(p.rsplit(":", 1)[1]) for p in svc["ports"]}, name
        for dependency in svc.get("depends_on", {}):
            assert dependency in document["services"], (name, dependency)
        check = " ".join(svc["healthcheck"]["test"])
        url = re.search(r"http://127\.0\.0\.1:(\d+)(/\w+)", check)
        assert url is not None and int(url.group(1)) == port, (name, check)
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=served_app(args, env)), base_url="http://svc"
        ) as http:
            assert (await http.get(url.group(2))).status_code in (200, 503), (name, check)


def test_compose_down_keeps_the_log_with_the_read_model_and_the_shoe_key() -> None:
    """``docker compose down`` removes the containers and keeps the named volumes; ``down -v``
    removes those too. The log, the read model folded from it and the key its shoes are sealed
    with belong together, so each lives in a named volume: both commands then keep all three or
    drop all three. Before, Kafka wrote its log to ``/tmp/kraft-combined-logs`` in its container
    (the image's default ``KAFKA_LOG_DIRS``) while the read model and the key were in volumes:
    after ``down`` and ``up`` the worker found its store's positions past the new, empty log's
    end, refused it (exit 2, "folded from another log") and ``restart: unless-stopped`` started
    it again, in a loop."""
    document = yaml.safe_load(COMPOSE.read_text())
    services = document["services"]
    named = set(document.get("volumes") or {})

    def named_mounts(name: str) -> dict[PurePosixPath, str]:
        """Where each of the service's volumes is mounted: every one a named volume (an
        anonymous one is left behind by ``down``, a bind mount survives ``down -v``)."""
        mounts = {}
        for entry in services[name].get("volumes", []):
            source, target, *_ = entry.split(":")
            assert source in named, f"{name}: {entry} is not a named volume"
            mounts[PurePosixPath(target)] = source
        return mounts

    def kept(name: str, path: str) -> None:
        place = PurePosixPath(path)
        assert any(place == t or t in place.parents for t in named_mounts(name)), (name, path)

    kafka = services["kafka"]["environment"]
    assert "KAFKA_LOG_DIRS" in kafka, "kafka: its log in the container (/tmp/kraft-combined-logs)"
    for log_dir in str(kafka["KAFKA_LOG_DIRS"]).split(","):
        kept("kafka", log_dir)
    postgres = services["postgres"]
    kept("postgres", postgres.get("environment", {}).get("PGDATA", "/var/lib/postgresql/data"))
    key_file = services["handler"]["environment"]["BLACKJACK_SHOE_KEY_FILE"]
    kept("handler", str(PurePosixPath(key_file).parent))
    # the worker's read model is the one in that PostgreSQL, and it reads that Kafka
    worker = services["projections"]["environment"]
    assert make_url(worker["BLACKJACK_DB_URL"]).host == "postgres"
    assert worker["BLACKJACK_KAFKA_BOOTSTRAP"].split(":")[0] == "kafka"
    for name in services:
        named_mounts(name)


def test_the_image_pins_every_dependency_within_what_the_package_allows() -> None:
    """deploy/docker/constraints.txt: the versions the image installs, and the development
    environment and CI (so the tests run on them), each one the package's own requirements
    accept (a stale pin would make an image that cannot install)."""
    import tomllib

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pinned: dict[str, str] = {}
    for line in (DEPLOY / "docker" / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, pin = line.partition("==")
            pinned[canonicalize_name(name)] = pin
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    for text in project["dependencies"]:
        requirement = Requirement(text)
        found = pinned.get(canonicalize_name(requirement.name))
        assert found is not None, f"{requirement.name} is not pinned"
        assert requirement.specifier.contains(found), (text, found)
    assert "-c constraints.txt" in (DEPLOY / "docker" / "Dockerfile").read_text()
    assert (
        "pip install -q -c deploy/docker/constraints.txt -e '.[dev]'"
        in (REPO / "Makefile").read_text()
    )
    assert "make install" in (REPO / ".ci" / "run").read_text()


def _ignored_by_docker(path: str, patterns: list[str]) -> bool:
    """Docker's rule for a ``.dockerignore``: the last pattern matching the path or one of
    its parent folders decides, a ``!`` one letting it back in (the patterns used here only:
    globs without ``**`` in the middle, folders with a trailing slash)."""
    parts = path.split("/")
    ignored = False
    for pattern in patterns:
        keep = pattern.startswith("!")
        glob = pattern.removeprefix("!").rstrip("/")
        if glob.startswith("**/"):
            matched = any(fnmatch.fnmatchcase(part, glob[3:]) for part in parts)
        else:
            prefixes = ("/".join(parts[:n]) for n in range(1, len(parts) + 1))
            matched = any(fnmatch.fnmatchcase(prefix, glob) for prefix in prefixes)
        if matched:
            ignored = not keep
    return ignored


def test_every_file_the_image_copies_is_in_its_build_context() -> None:
    """A review: the ignore file kept ``deploy/docker/constraints.txt`` out of the build
    context, which the Dockerfile copies (the build failed at that ``COPY``, and compose's
    with it), while a test only read the Dockerfile's text."""
    docker = DEPLOY / "docker"
    patterns = [
        line.strip()
        for line in (docker / "Dockerfile.dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert _ignored_by_docker("deploy/docker/compose.yml", patterns)  # the rule bites
    assert _ignored_by_docker("services/blackjack/__pycache__/cli.pyc", patterns)
    copied = []
    for line in (docker / "Dockerfile").read_text().splitlines():
        words = line.split()
        if words[:1] == ["COPY"] and not any(w.startswith("--from") for w in words):
            copied += words[1:-1]
    assert "deploy/docker/constraints.txt" in copied and "services" in copied
    for source in copied:
        assert (REPO / source).exists(), source
        files = (
            [source]
            if (REPO / source).is_file()
            else [str(f.relative_to(REPO)) for f in (REPO / source).rglob("*.py")]
        )
        assert files and not any(_ignored_by_docker(f, patterns) for f in files), source


# A probe's answer may take over Kubernetes' default second on a loaded node: one worker
# /healthz in 120 took 1.003 s at load average 15 on 2 cores (docs/operations.md, "Probes"),
# and a worker's readiness fails on one miss, out of the query API's Service for 10 s.
PROBE_TIMEOUT_S = 3


def test_every_probe_waits_longer_than_a_loaded_node_answers() -> None:
    for workload in workloads():
        container = the_container(workload)
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            spec = container[probe]
            name = (workload["metadata"]["name"], probe)
            assert spec.get("timeoutSeconds", 1) >= PROBE_TIMEOUT_S, name
            assert spec["timeoutSeconds"] < spec.get("periodSeconds", 10), name


def _families_of(*modules: Any) -> set[str]:
    """The metric families the modules define (as /metrics names them)."""
    return {
        family.name
        for module in modules
        for value in vars(module).values()
        if isinstance(value, MetricWrapperBase)
        for family in value.describe()
    }


def _served_families(text: str) -> set[str]:
    return {family.name for family in text_string_to_metric_families(text)}


async def test_each_pod_serves_its_own_roles_metrics_and_together_every_one_used(
    parsed_args: Any,
) -> None:
    """One global registry holds every metric a process imported: a projection worker (which
    imports the handler's metric module through the modules they share) served the handler's
    families at 0, and a handler-only pod the query API's. Each pod of the manifests now serves
    its role's families, the shared ones and the process collector; the pods together still
    serve every family the rules and the dashboard read."""
    import blackjack.api.routes
    import blackjack.observability.metrics
    import blackjack.projections.health
    import blackjack.projections.metrics

    handler_only = _families_of(blackjack.observability.metrics)
    worker_only = _families_of(
        blackjack.projections.metrics, blackjack.projections.health, blackjack.api.routes
    )
    served: dict[str, set[str]] = {}
    for workload in workloads():
        args, env = parsed_args(the_container(workload))
        path = workload["spec"]["template"]["metadata"]["annotations"]["prometheus.io/path"]
        transport = httpx.ASGITransport(app=served_app(args, env))
        async with httpx.AsyncClient(transport=transport, base_url="http://pod") as http:
            answer = await http.get(path)
        assert answer.status_code == 200
        served[workload["metadata"]["name"]] = families = _served_families(answer.text)
        # every process: prometheus-client's process collector (BlackjackProcessRestarting),
        # and its HTTP server's refusals (a worker's query API is what a flood reaches)
        assert {
            "process_start_time_seconds",
            "blackjack_process_role",
            "blackjack_http_connections_refused",
        } <= families
        if args.command == "serve":
            assert args.no_projections  # the manifests' handlers
            assert "blackjack_partitions" in families
            assert families & worker_only == set(), workload["metadata"]["name"]
        else:
            assert "blackjack_projection_events" in families
            assert families & handler_only == set(), workload["metadata"]["name"]
    assert len(served) == 2
    everywhere = set().union(*served.values())
    used = {
        SERIES[metric].family
        for expr in [
            *(r["expr"] for g in rules()["groups"] for r in g["rules"]),
            *(t["expr"] for p in dashboard()["panels"] for t in p.get("targets", [])),
        ]
        for metric, _ in parse(expr).selectors
        if metric in SERIES
    }
    # the casino platforms' clients' (blackjack.client): served by the platforms' processes,
    # which import the client; no process of the service does (test_process_metrics.py)
    platforms = {family for family in used if family.startswith("blackjack_client_")}
    assert platforms == {
        s.family for s in SERIES.values() if s.family.startswith("blackjack_client_")
    }
    assert used - platforms - everywhere == set()


def test_every_alert_has_a_runbook_row_and_every_row_an_alert() -> None:
    """The runbook table of docs/operations.md names each alert of rules.yml (a row may name
    several): BlackjackProjectionSchemaMismatch had none (an operations review)."""
    alerts = {r["alert"] for g in rules()["groups"] for r in g["rules"] if "alert" in r}
    runbook = (REPO / "docs" / "operations.md").read_text()
    rows = set()
    for line in runbook.splitlines():
        if line.startswith("| `Blackjack"):
            rows |= set(re.findall(r"`(Blackjack\w+)`", line.split(" | ")[0]))
    assert alerts - rows == set(), "alerts without a runbook row"
    assert rows - alerts == set(), "runbook rows without an alert"
