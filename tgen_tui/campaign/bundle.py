"""An artefact bundle: everything needed to reproduce a campaign's table elsewhere.

``campaign.yaml`` (its ``profile:`` pointing into the bundle), the profile, every
point's profile and result, the state file, the report (text, Markdown, CSV, JSON), the
lab's settings when the DUT is the lab, the tester's send-path calibration cache, and
the environment (host, kernel, CPU, Python, tgen and package versions).
"""

from __future__ import annotations

import io
import json
import os
import platform
import tarfile
import time
from pathlib import Path

from tgen_tui.campaign.runner import STATE, State
from tgen_tui.profiles.campaign import Campaign


def environment() -> dict:
    from importlib import metadata

    pkgs = {}
    for name in ("tgen-tui", "numpy", "scapy", "textual", "trio", "pydantic", "ruamel.yaml"):
        try:
            pkgs[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pkgs[name] = None
    cpu = ""
    try:
        cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                    if ln.startswith("model name")), "")  # fmt: skip
    except OSError:
        pass
    return {"host": platform.node(), "kernel": platform.release(), "cpu": cpu,
            "cpus": os.cpu_count(), "python": platform.python_version(), "packages": pkgs,
            "made": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}  # fmt: skip


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = int(time.time())
    tar.addfile(info, io.BytesIO(data))


def make_bundle(c: Campaign, text: str, campaign_path: Path, out_dir: Path, dest: Path,
                lab_prefix: str | None, report_text: dict[str, str]) -> list[str]:  # fmt: skip
    """Write ``dest`` (.tar.gz); the member names."""
    from ruamel.yaml import YAML

    root = c.name
    prof_src = (campaign_path.parent / c.profile).resolve()
    y = YAML()
    doc = y.load(text)
    doc["profile"] = f"profile/{prof_src.name}"
    buf = io.StringIO()
    y.dump(doc, buf)
    names = []
    with tarfile.open(dest, "w:gz") as tar:

        def add(name: str, data: bytes) -> None:
            _add_bytes(tar, f"{root}/{name}", data)
            names.append(f"{root}/{name}")

        add("campaign.yaml", buf.getvalue().encode())
        add(f"profile/{prof_src.name}", prof_src.read_bytes())
        for sub in ("points", "results"):
            for f in sorted((out_dir / sub).glob("*")):
                add(f"{sub}/{f.name}", f.read_bytes())
        if (out_dir / STATE).exists():
            add(STATE, (out_dir / STATE).read_bytes())
        for name, txt in report_text.items():
            add(f"report/{name}", txt.encode())
        add("environment.json", json.dumps(environment(), indent=2).encode())
        if lab_prefix:
            try:
                from tgen_tui.lab import topology

                st = topology.status(lab_prefix)
                add("lab.json", json.dumps({"prefix": lab_prefix, "config": st.get("config"),
                                            "dut": st.get("dut")}, indent=2, default=str).encode())  # fmt: skip
            except Exception as e:  # noqa: BLE001 - a bundle without the lab's view still helps
                add("lab.json", json.dumps({"prefix": lab_prefix, "error": str(e)}).encode())
        from tgen_tui.calibrate.cache import cache_dir

        cache = cache_dir()
        for f in sorted(cache.glob("*.json")) if cache.is_dir() else []:
            add(f"calibration/{f.name}", f.read_bytes())
    return names


__all__ = ["environment", "make_bundle", "State"]
