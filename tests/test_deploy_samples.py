"""deploy/ samples work as shipped (no Docker daemon or cluster here): compose files and
Kubernetes manifests parse and name only files, services, volumes, ConfigMaps and
configuration keys that exist; the image's configuration and environment pass `tracescore
check`; the image's working directory is its volume, owned by its user; the two Kubernetes
folders never collide; the systemd unit says how its binary and user are installed and
passes `systemd-analyze verify` where that tool exists."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from collector.config import Config

DEPLOY = Path(__file__).parents[1] / "deploy"
REPO = DEPLOY.parent
COMPOSE_FILES = ["docker-compose.yml", "docker-compose.scale.yml", "docker-compose.sentinel.yml"]
K8S_FOLDERS = ["sqlite", "redis"]


def config_keys() -> set[str]:
    """Every TRACESCORE_<SECTION>_<KEY> variable the configuration knows."""
    keys = set()
    for section, field in Config.model_fields.items():
        model = field.annotation
        if section != "scorers" and model is not None and hasattr(model, "model_fields"):
            keys.update(f"TRACESCORE_{section}_{key}".upper() for key in model.model_fields)
    return keys


def dockerfile_env() -> dict[str, str]:
    return dict(re.findall(r"\b([A-Z][A-Z0-9_]+)=(\S+)", (DEPLOY / "Dockerfile").read_text()))


def compose(name: str) -> dict[str, Any]:
    return dict(yaml.safe_load((DEPLOY / name).read_text()))


def tracescore_check(config_text: str, tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`tracescore check` on a config as the container sees it: files mounted in
    /etc/tracescore are read from deploy/ (or from ``tmp_path`` when written there)."""
    for mounted in re.findall(r"/etc/tracescore/([\w.]+\.py)", config_text):
        local = tmp_path / mounted if (tmp_path / mounted).exists() else DEPLOY / mounted
        config_text = config_text.replace(f"/etc/tracescore/{mounted}", str(local))
    config_text = config_text.replace("sqlite:////var/lib/tracescore/", f"sqlite:///{tmp_path}/")
    path = tmp_path / "tracescore.toml"
    path.write_text(config_text)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("TRACESCORE_", "OTEL_"))}
    return subprocess.run([sys.executable, "-m", "collector.cli", "check", str(path)], capture_output=True,
                          text=True, timeout=120, check=False, env={**clean, **env})


@pytest.mark.parametrize("name", COMPOSE_FILES)
def test_compose_files_name_only_what_exists(name: str) -> None:
    doc = compose(name)
    services, volumes = doc["services"], set(doc.get("volumes") or {})
    known = config_keys()
    for service_name, service in services.items():
        build = service.get("build")
        if build is not None:
            assert (DEPLOY / build["context"] / build["dockerfile"]).is_file(), service_name
        else:
            assert "image" in service, service_name
        for mount in service.get("volumes", []):
            source = mount.split(":")[0]
            if source.startswith("."):
                assert (DEPLOY / source).is_file(), f"{service_name}: {source}"
            else:
                assert source in volumes, f"{service_name}: volume {source}"
        for other in service.get("depends_on", []):
            assert other in services, f"{service_name} depends on {other}"
        for key in service.get("environment") or {}:
            if key.startswith("TRACESCORE_") and key != "TRACESCORE_TOKEN":  # the token: auth_token = env:...
                assert key in known, f"{service_name}: {key} is not a configuration key"


def test_dockerfile_env_names_configuration_keys() -> None:
    known = config_keys()
    assert {k for k in dockerfile_env() if k.startswith("TRACESCORE_")} <= known


def test_the_image_works_in_its_volume_as_its_own_user() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    user = re.search(r"^USER (\S+)", text, re.M)
    assert user is not None
    workdir = re.findall(r"^WORKDIR (\S+)", text[: user.start()], re.M)[-1]
    assert re.search(rf"chown {user.group(1)}(:{user.group(1)})? {re.escape(workdir)}\b", text)
    assert f'VOLUME ["{workdir}"]' in text
    assert "TRACESCORE_QUEUE_URL" not in dockerfile_env()  # the default relative queue path lands in WORKDIR


def test_the_compose_sample_scores_out_of_the_box(tmp_path: Path) -> None:
    """docker-compose.yml's tracescore service: its mounted config, with the image's environment,
    passes check with the example scorers; the sample agent exports to it."""
    doc = compose("docker-compose.yml")
    service = doc["services"]["tracescore"]
    mounts = dict(m.split(":")[:2] for m in service["volumes"] if m.startswith("."))
    config_source = next(src for src, dst in mounts.items() if dst == service["command"][-1])
    env = {**dockerfile_env(), **{k: str(v) for k, v in (service.get("environment") or {}).items()}}
    proc = tracescore_check((DEPLOY / config_source).read_text(), tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    assert "scorer answer-length" in proc.stdout and "scorer completeness" in proc.stdout
    assert "warning" not in proc.stdout and "export: http://phoenix:4317" in proc.stdout
    agent = doc["services"]["sample-agent"]
    assert agent["environment"]["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://tracescore:4317"
    script = next(m.split(":")[0] for m in agent["volumes"] if m.endswith(f"{agent['entrypoint'][-1]}:ro"))
    assert (DEPLOY / script).is_file()
    assert "phoenix" in doc["services"] and doc["services"]["phoenix"]["image"].startswith("arizephoenix/phoenix")


def k8s_documents(folder: str) -> list[dict[str, Any]]:
    docs = []
    for path in sorted((DEPLOY / "kubernetes" / folder).glob("*.yaml")):
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


def test_kubernetes_manifests_live_in_two_folders_that_never_collide() -> None:
    assert sorted(p.name for p in (DEPLOY / "kubernetes").glob("*.yaml")) == []  # none outside the folders
    names: dict[tuple[str, str], str] = {}
    for folder in K8S_FOLDERS:
        for doc in k8s_documents(folder):
            key = (doc["kind"], doc["metadata"]["name"])
            assert key not in names, f"{key} is in both {names.get(key)} and {folder}"
            names[key] = folder
    selectors = {folder: [d["spec"]["selector"] for d in k8s_documents(folder) if d["kind"] == "Service"]
                 for folder in K8S_FOLDERS}
    pods = {folder: [d["spec"]["template"]["metadata"]["labels"] for d in k8s_documents(folder)
                     if d["kind"] in ("Deployment", "StatefulSet")] for folder in K8S_FOLDERS}
    for folder, other in (("sqlite", "redis"), ("redis", "sqlite")):
        for selector in selectors[folder]:
            assert any(selector.items() <= labels.items() for labels in pods[folder])  # selects its own pods
            assert not any(selector.items() <= labels.items() for labels in pods[other])  # never the other's


@pytest.mark.parametrize("folder", K8S_FOLDERS)
def test_kubernetes_references_exist_and_the_config_checks(folder: str, tmp_path: Path) -> None:
    docs = k8s_documents(folder)
    text = "\n".join(p.read_text() for p in (DEPLOY / "kubernetes" / folder).glob("*.yaml"))
    config_maps = {d["metadata"]["name"]: d["data"] for d in docs if d["kind"] == "ConfigMap"}
    for workload in (d for d in docs if d["kind"] in ("Deployment", "StatefulSet")):
        spec = workload["spec"]
        assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
        pod = spec["template"]["spec"]
        for volume in pod.get("volumes", []):
            if "configMap" in volume:
                assert volume["configMap"]["name"] in config_maps
        for container in pod["containers"]:
            for env in container.get("env", []):
                ref = (env.get("valueFrom") or {}).get("secretKeyRef")
                if ref and not ref.get("optional"):  # a Secret nothing here creates: the file says how
                    assert f"kubectl create secret generic {ref['name']} --from-literal={ref['key']}=" in text
            for source in container.get("envFrom", []):
                if "secretRef" in source:
                    assert source["secretRef"].get("optional") is True
                    assert f"kubectl create secret generic {source['secretRef']['name']}" in text
    (data,) = config_maps.values()
    for name, content in data.items():
        if name.endswith(".py"):
            (tmp_path / name).write_text(content)
    proc = tracescore_check(data["tracescore.toml"], tmp_path, {**dockerfile_env(), "TRACESCORE_TOKEN": "t"})
    assert proc.returncode == 0, proc.stderr
    assert "scorer answer-length" in proc.stdout and "warning" not in proc.stdout
    if folder == "redis":
        services = {d["metadata"]["name"] for d in docs if d["kind"] == "Service"}
        host = re.search(r'url = "redis://([\w.-]+):', data["tracescore.toml"])
        assert host is not None and host.group(1) in services


UNIT = DEPLOY / "systemd" / "tracescore.service"


def test_the_systemd_unit_says_how_its_binary_and_user_are_installed() -> None:
    text = UNIT.read_text()
    binary = re.search(r"^ExecStart=(\S+) serve", text, re.M)
    user = re.search(r"^User=(\S+)", text, re.M)
    assert binary is not None and user is not None
    venv = binary.group(1).removesuffix("/bin/tracescore")
    assert f"python3 -m venv {venv}" in text and f"{venv}/bin/pip install" in text
    assert re.search(rf"^#\s+useradd --system .*\b{user.group(1)}$", text, re.M)
    assert re.search(rf"^ExecStartPre={re.escape(binary.group(1))} check ", text, re.M)
    stop = re.search(r"^TimeoutStopSec=(\d+)", text, re.M)
    assert stop is not None and int(stop.group(1)) > Config().workers.drain_timeout_s


def test_the_systemd_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is not installed here: only the static checks of the unit ran")
    # A root holding the system's units and the installed binary, as the install steps leave it.
    root = tmp_path / "root"
    units = Path("/usr/lib/systemd/system")
    if units.is_dir():
        shutil.copytree(units, root / "usr/lib/systemd/system", symlinks=True)
    binary = re.search(r"^ExecStart=(\S+)", UNIT.read_text(), re.M)
    assert binary is not None
    installed = root / binary.group(1).lstrip("/")
    installed.parent.mkdir(parents=True)
    installed.write_text("#!/bin/sh\n")
    installed.chmod(0o755)
    (root / "etc/systemd/system").mkdir(parents=True)
    shutil.copy(UNIT, root / "etc/systemd/system" / UNIT.name)
    proc = subprocess.run([tool, "verify", f"--root={root}", str(root / "etc/systemd/system" / UNIT.name)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0 and proc.stderr.strip() == "", proc.stderr
    # And it does find faults: the same unit naming a binary that is not installed fails.
    installed.unlink()
    proc = subprocess.run([tool, "verify", f"--root={root}", str(root / "etc/systemd/system" / UNIT.name)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode != 0 and "is not executable" in proc.stderr


def test_the_sentinel_sample_names_its_sentinels_and_waits_for_a_replica(tmp_path: Path) -> None:
    """docker-compose.sentinel.yml: its tracescore config passes check, reaches the compose's
    three sentinels for the primary they monitor, and answers success once a replica holds a request."""
    doc = compose("docker-compose.sentinel.yml")
    services = doc["services"]
    receiver = services["tracescore-receiver"]
    config_text = (DEPLOY / "tracescore.sentinel.toml").read_text()
    proc = tracescore_check(config_text, tmp_path, {**dockerfile_env(), "TRACESCORE_TOKEN": ""})
    assert proc.returncode == 0, proc.stderr
    assert "Sentinel primary 'primary' via 3 sentinels; success after 1 replica acknowledged" in proc.stdout
    sentinels = re.findall(r"(sentinel-\d):26379", config_text)
    assert sorted(sentinels) == sorted(n for n in services if n.startswith("sentinel-")) == list(receiver["depends_on"])[:3]
    script = services["sentinel-1"]["command"][-1]
    assert "sentinel monitor primary redis-a 6379 2" in script and "--sentinel" in script
    assert services["redis-b"]["command"][-2:] == ["redis-a", "6379"]  # the replica of the monitored primary
