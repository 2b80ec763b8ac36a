"""Pool sizes follow the container's CPU limit, not the node's core count."""

from __future__ import annotations

from pathlib import Path

import pytest

from rewardhub import config
from rewardhub.config import Settings, cgroup_cpu_limit


def _tree(tmp_path: Path, own: str, files: dict[str, str]) -> tuple[Path, Path]:
    root = tmp_path / "cgroup"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    proc = tmp_path / "proc-self-cgroup"
    proc.write_text(own)
    return root, proc


def test_cgroup_v2_limit(tmp_path: Path) -> None:
    root, proc = _tree(tmp_path, "0::/\n", {"cpu.max": "400000 100000\n"})
    assert cgroup_cpu_limit(root, proc) == 4
    root, proc = _tree(tmp_path, "0::/kubepods/pod1/c1\n", {"kubepods/pod1/c1/cpu.max": "250000 100000\n"})
    assert cgroup_cpu_limit(root, proc) == 3  # 2.5 CPUs: rounded up
    root, proc = _tree(tmp_path, "0::/\n", {"cpu.max": "max 100000\n"})
    assert cgroup_cpu_limit(root, proc) is None


def test_cgroup_v1_limit(tmp_path: Path) -> None:
    files = {"cpu,cpuacct/cpu.cfs_quota_us": "200000\n", "cpu,cpuacct/cpu.cfs_period_us": "100000\n"}
    root, proc = _tree(tmp_path, "4:memory:/x\n2:cpu,cpuacct:/\n", files)
    assert cgroup_cpu_limit(root, proc) == 2
    files = {"cpu,cpuacct/cpu.cfs_quota_us": "-1\n", "cpu,cpuacct/cpu.cfs_period_us": "100000\n"}
    root, proc = _tree(tmp_path, "2:cpu,cpuacct:/\n", files)
    assert cgroup_cpu_limit(root, proc) is None


def test_a_parent_cgroup_limit_counts(tmp_path: Path) -> None:
    # The quota of an ancestor holds too: a leaf with none ("max", "-1") must not hide it (a container
    # whose init moved its processes into a child cgroup, a systemd slice with CPUQuota).
    files = {"init/cpu.max": "max 100000\n", "cpu.max": "400000 100000\n"}
    root, proc = _tree(tmp_path, "0::/init\n", files)
    assert cgroup_cpu_limit(root, proc) == 4
    files = {"s.slice/a/cpu.max": "300000 100000\n", "s.slice/cpu.max": "150000 100000\n", "cpu.max": "max 1"}
    root, proc = _tree(tmp_path, "0::/s.slice/a\n", files)
    assert cgroup_cpu_limit(root, proc) == 2  # the smallest on the way up
    files = {
        "cpu/job/step/cpu.cfs_quota_us": "-1\n",
        "cpu/job/step/cpu.cfs_period_us": "100000\n",
        "cpu/job/cpu.cfs_quota_us": "300000\n",
        "cpu/job/cpu.cfs_period_us": "100000\n",
    }
    root, proc = _tree(tmp_path, "3:cpu:/job/step\n", files)
    assert cgroup_cpu_limit(root, proc) == 3


def test_no_cgroup_files(tmp_path: Path) -> None:
    assert cgroup_cpu_limit(tmp_path / "none", tmp_path / "none-either") is None


def test_pools_default_to_the_container_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    # A pod limited to 4 CPUs on a 64-core node started 64 verifier processes and 64 sandbox slots per
    # service process: the affinity mask shows the node's cores, the limit is a CFS quota.
    monkeypatch.setattr(config.os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)
    monkeypatch.setattr(config, "cgroup_cpu_limit", lambda: 4)
    monkeypatch.delenv("REWARDHUB_CPU_WORKERS", raising=False)
    monkeypatch.delenv("REWARDHUB_SANDBOX_WORKERS", raising=False)
    s = Settings(_env_file=None)  # type: ignore[call-arg]
    assert s.cpu_workers == 4 and s.sandbox_workers == 4
    monkeypatch.setattr(config, "cgroup_cpu_limit", lambda: None)
    assert Settings(_env_file=None).cpu_workers == 64  # type: ignore[call-arg]
