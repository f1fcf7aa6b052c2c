"""Offline helpers for the deploy/ tests: load YAML, render kustomizations, evaluate
NetworkPolicies, match NATS subjects.

kustomize is not installed here, so ``render`` implements the subset of it that deploy/k8s
uses — ``resources`` (files and directories), ``components``, ``namespace``, ``images``,
``replicas`` and ``patches`` with strategic-merge patch files — and refuses anything else, so a
new kustomize feature in deploy/ fails loudly instead of being silently ignored.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"

Doc = dict[str, Any]

CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"}
KUSTOMIZATION_FIELDS = {"apiVersion", "kind", "namespace", "resources", "components", "images", "replicas", "patches"}

# Strategic-merge keys of the lists that deploy/k8s patches (everything else is replaced).
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "topologySpreadConstraints": "topologyKey",
}


def load_docs(path: Path) -> list[Doc]:
    """Every non-empty YAML document of ``path``."""
    with path.open() as f:
        return [d for d in yaml.safe_load_all(f) if d]


def key_of(doc: Mapping[str, Any]) -> tuple[str, str, str]:
    meta = doc.get("metadata", {})
    return doc["kind"], meta.get("namespace", ""), meta["name"]


def render(directory: Path) -> list[Doc]:
    """The manifests ``kubectl kustomize directory`` would print (for the supported subset)."""
    kustomization = load_docs(directory / "kustomization.yaml")[0]
    unknown = set(kustomization) - KUSTOMIZATION_FIELDS
    if unknown:
        raise ValueError(f"{directory}: kustomize fields not supported by the test renderer: {sorted(unknown)}")
    docs: list[Doc] = []
    for entry in kustomization.get("resources", []):
        docs.extend(_load_resource(directory / entry))
    for entry in kustomization.get("components", []):
        component_dir = (directory / entry).resolve()
        component = load_docs(component_dir / "kustomization.yaml")[0]
        if component.get("kind") != "Component":
            raise ValueError(f"{component_dir} is not a kustomize Component")
        docs.extend(render(component_dir))
    namespace = kustomization.get("namespace")
    if namespace:
        for doc in docs:
            if doc["kind"] not in CLUSTER_SCOPED:
                doc.setdefault("metadata", {})["namespace"] = namespace
    for patch_entry in kustomization.get("patches", []):
        if set(patch_entry) != {"path"}:
            raise ValueError(f"only file patches are supported, got {patch_entry}")
        for patch in load_docs(directory / patch_entry["path"]):
            _apply_patch(docs, patch, namespace)
    for image in kustomization.get("images", []):
        _set_image(docs, image)
    for replica in kustomization.get("replicas", []):
        _set_replicas(docs, replica)
    seen: set[tuple[str, str, str]] = set()
    for doc in docs:
        k = key_of(doc)
        if k in seen:
            raise ValueError(f"{directory}: duplicate resource {k}")
        seen.add(k)
    return docs


def _load_resource(path: Path) -> list[Doc]:
    path = path.resolve()
    if path.is_dir():
        return render(path)
    return copy.deepcopy(load_docs(path))


def _apply_patch(docs: list[Doc], patch: Doc, namespace: str | None) -> None:
    kind, name = patch["kind"], patch["metadata"]["name"]
    patch_ns = patch["metadata"].get("namespace", namespace or "")
    targets = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    targets = [d for d in targets if d["metadata"].get("namespace", "") == patch_ns] or targets
    if len(targets) != 1:
        raise ValueError(f"patch {kind}/{name} matches {len(targets)} resources")
    merged = strategic_merge(targets[0], patch)
    targets[0].clear()
    targets[0].update(merged)


def strategic_merge(base: Any, patch: Any, field_name: str = "") -> Any:
    """Strategic merge of ``patch`` into ``base`` for maps and the lists in MERGE_KEYS."""
    if isinstance(base, dict) and isinstance(patch, dict):
        if "$patch" in patch:
            raise ValueError("$patch directives are not supported by the test renderer")
        out = dict(base)
        for key, value in patch.items():
            out[key] = strategic_merge(base[key], value, key) if key in base else copy.deepcopy(value)
        return out
    if isinstance(base, list) and isinstance(patch, list) and field_name in MERGE_KEYS:
        merge_key = MERGE_KEYS[field_name]
        out_list = [copy.deepcopy(item) for item in base]
        for item in patch:
            index = next((i for i, b in enumerate(out_list) if b.get(merge_key) == item.get(merge_key)), None)
            if index is None:
                out_list.append(copy.deepcopy(item))
            else:
                out_list[index] = strategic_merge(out_list[index], item, "")
        return out_list
    return copy.deepcopy(patch)


def pod_spec(doc: Mapping[str, Any]) -> dict[str, Any] | None:
    """The pod template spec of a workload, else None."""
    if doc["kind"] in {"Deployment", "StatefulSet", "DaemonSet", "Job", "ReplicaSet"}:
        return doc["spec"]["template"]["spec"]  # type: ignore[no-any-return]
    if doc["kind"] == "CronJob":
        return doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]  # type: ignore[no-any-return]
    return None


def _set_image(docs: list[Doc], image: Mapping[str, str]) -> None:
    for doc in docs:
        spec = pod_spec(doc)
        if spec is None:
            continue
        for container in spec.get("containers", []) + spec.get("initContainers", []):
            name, _, tag = container["image"].partition(":")
            if name == image["name"]:
                container["image"] = f"{image.get('newName', name)}:{image.get('newTag', tag)}"


def _set_replicas(docs: list[Doc], replica: Mapping[str, Any]) -> None:
    matches = [
        d for d in docs if d["kind"] in {"Deployment", "StatefulSet"} and d["metadata"]["name"] == replica["name"]
    ]
    if len(matches) != 1:
        raise ValueError(f"replicas entry {replica['name']} matches {len(matches)} workloads")
    matches[0]["spec"]["replicas"] = replica["count"]


# --------------------------------------------------------------------------- NetworkPolicy


@dataclass(frozen=True)
class Endpoint:
    """A pod somewhere in the cluster: its namespace (with that namespace's labels) and labels."""

    namespace: str
    labels: Mapping[str, str]
    namespace_labels: Mapping[str, str] = field(default_factory=dict)

    def ns_labels(self) -> dict[str, str]:
        return {"kubernetes.io/metadata.name": self.namespace, **self.namespace_labels}


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Kubernetes label-selector semantics; an empty selector matches everything."""
    if selector is None:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
        if op not in {"In", "NotIn", "Exists", "DoesNotExist"}:
            raise ValueError(f"unknown selector operator {op}")
    return True


def _peer_matches(peer: Mapping[str, Any], policy_ns: str, other: Endpoint) -> bool:
    if "ipBlock" in peer:
        return False  # the tests model pods only; deploy/ uses no ipBlock peers
    if "namespaceSelector" in peer:
        if not selector_matches(peer["namespaceSelector"], other.ns_labels()):
            return False
    elif other.namespace != policy_ns:
        return False  # a podSelector alone selects pods of the policy's own namespace
    return selector_matches(peer.get("podSelector"), other.labels)


def _port_matches(ports: Iterable[Mapping[str, Any]] | None, port: int, protocol: str) -> bool:
    if not ports:
        return True
    for p in ports:
        if p.get("protocol", "TCP") != protocol:
            continue
        if "port" not in p:
            return True
        if not isinstance(p["port"], int):
            raise ValueError("the test evaluator needs numeric ports in NetworkPolicies")
        if p["port"] <= port <= p.get("endPort", p["port"]):
            return True
    return False


def _direction_allows(
    policies: Iterable[Doc], subject: Endpoint, other: Endpoint, port: int, protocol: str, direction: str
) -> bool:
    """Is ``subject``'s traffic in ``direction`` ("Ingress"/"Egress") with ``other`` allowed?"""
    relevant = [
        p
        for p in policies
        if p["metadata"]["namespace"] == subject.namespace
        and selector_matches(p["spec"].get("podSelector"), subject.labels)
        and direction in p["spec"].get("policyTypes", ["Ingress"])
    ]
    if not relevant:
        return True  # no policy isolates this pod in this direction
    rules_key, peers_key = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
    for policy in relevant:
        for rule in policy["spec"].get(rules_key) or []:
            peers = rule.get(peers_key)
            peer_ok = not peers or any(_peer_matches(peer, subject.namespace, other) for peer in peers)
            if peer_ok and _port_matches(rule.get("ports"), port, protocol):
                return True
    return False


def allowed(policies: list[Doc], src: Endpoint, dst: Endpoint, port: int, protocol: str = "TCP") -> bool:
    """A connection is allowed when the source may send it and the destination may receive it."""
    return _direction_allows(policies, src, dst, port, protocol, "Egress") and _direction_allows(
        policies, dst, src, port, protocol, "Ingress"
    )


# --------------------------------------------------------------------------- NATS subjects


def subject_matches(pattern: str, subject: str) -> bool:
    """NATS wildcard matching: ``*`` is one token, ``>`` one or more trailing tokens."""
    p_tokens, s_tokens = pattern.split("."), subject.split(".")
    for i, token in enumerate(p_tokens):
        if token == ">":
            return len(s_tokens) > i
        if i >= len(s_tokens) or (token != "*" and token != s_tokens[i]):
            return False
    return len(p_tokens) == len(s_tokens)


def may_publish(permissions: Mapping[str, Any], subject: str) -> bool:
    """NATS publish permission: allowed by some allow entry and by no deny entry."""
    publish = permissions.get("publish", {})
    allow = publish.get("allow")
    deny = publish.get("deny", [])
    allowed_by_list = True if allow is None else any(subject_matches(p, subject) for p in allow)
    return allowed_by_list and not any(subject_matches(p, subject) for p in deny)


def conf_permissions(text: str, account: str = "SOCAI") -> dict[str, dict[str, Any]]:
    """The users' permissions in a nats.conf (the subset deploy/nats/nats.conf uses), shaped
    like the Helm values' ``permissions``: ``{"publish": {"allow", "deny"}, "subscribe": {"allow"}}``.

    Comments are dropped first (they may quote a subject); each user's block runs from its
    ``user:`` to the next one, or to the end of the account."""
    code = re.sub(r"(?m)(^|\s)#.*$", "", text)
    start = code.index(f"{account} {{")
    end = code.find("\n  }", start)
    body = code[start:end]
    out: dict[str, dict[str, Any]] = {}
    blocks = re.split(r"\buser: ", body)[1:]
    for block in blocks:
        name = re.match(r"\w+", block).group(0)  # type: ignore[union-attr]
        if "publish:" not in block:
            out[name] = {}
            continue
        publish = block[block.index("publish:") : block.index("subscribe:")]
        subscribe = block[block.index("subscribe:") :]

        def strings(segment: str, key: str) -> list[str]:
            found = re.search(rf"{key}:\s*\[(.*?)\]", segment, re.S)
            return re.findall(r'"([^"]*)"', found.group(1)) if found else []

        out[name] = {
            "publish": {"allow": strings(publish, "allow"), "deny": strings(publish, "deny")},
            "subscribe": {"allow": strings(subscribe, "allow")},
        }
    return out
