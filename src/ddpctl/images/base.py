"""``ddpctl image base``: an air-gapped base image (Debian + Python from an apt mirror) made with
``debootstrap`` and imported into the engine, for sites (and this project's CI) that cannot pull from a
registry."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from ddpctl import dockerengine
from ddpctl.dockerengine.tools import image_id as _image_id
from ddpctl.dockerengine.tools import image_labels
from ddpctl.errors import EngineError, UsageError
from ddpctl.images.build_output import BuildProgress
from ddpctl.images.plans import LABEL_BASE_HASH, BasePlan
from ddpctl.images.tidy import drop_if_untagged

# ---------------------------------------------------------------------------------------------- base


def build_base(plan: BasePlan, *, force: bool = False, progress: BuildProgress | None = None,
               workdir: Path | None = None) -> str:
    """Make the local Debian base with debootstrap and import it; returns the image id."""
    progress = progress or BuildProgress()
    if os.geteuid() != 0:
        raise UsageError("'ddpctl image base' needs root (debootstrap creates device nodes and chroots)",
                         "run it as root, e.g. 'sudo ddpctl image base'")
    if shutil.which("debootstrap") is None:
        raise UsageError("debootstrap is not installed", "apt-get install debootstrap (scripts/ci-setup.sh does)")
    client = dockerengine.connect()
    labels = image_labels(client, plan.tag)
    if labels is not None and labels.get(LABEL_BASE_HASH) == plan.input_hash and not force:
        progress.done(f"{plan.tag} is up to date ({plan.suite}, {', '.join(plan.packages)})")
        return _image_id(client, plan.tag) or ""
    previous_id = _image_id(client, plan.tag)
    parent = workdir or Path(os.environ.get("TMPDIR", "/var/tmp"))
    root = Path(tempfile.mkdtemp(prefix="ddpctl-base-", dir=parent))
    try:
        progress.line(f"debootstrap {plan.suite} from {plan.mirror} into {root}")
        proc = subprocess.Popen(plan.debootstrap_argv(str(root)), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        tail: list[str] = []
        assert proc.stdout is not None
        for line in proc.stdout:
            progress.line(line)
            tail = (tail + [line.strip()])[-3:]
        if proc.wait() != 0:
            raise EngineError(f"debootstrap failed with exit code {proc.returncode} ({' | '.join(tail)})",
                              f"check that the mirror {plan.mirror} is reachable (--mirror URL)")
        # Nothing of apt's download cache belongs in the image.
        for sub in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for p in (root / sub).glob("*"):
                if p.is_file():
                    p.unlink()
        progress.line(f"importing {root} as {plan.tag}")
        tar = subprocess.Popen(["tar", "-C", str(root), "--numeric-owner", "-c", "."], stdout=subprocess.PIPE)
        try:
            assert tar.stdout is not None
            repo, _, tag = plan.tag.rpartition(":") if ":" in plan.tag.split("/")[-1] else (plan.tag, "", "latest")
            out = client.api.import_image_from_stream(tar.stdout, repository=repo, tag=tag,
                                                      changes=plan.import_changes())
        finally:
            tar.stdout.close()
            tar.wait()
        if tar.returncode != 0:
            raise EngineError(f"tar of the base root file system failed ({tar.returncode})", "see the messages above")
        status = [json.loads(x) for x in str(out).splitlines() if x.strip().startswith("{")]
        errors = [s["error"] for s in status if "error" in s]
        if errors:
            raise EngineError(f"importing the base image failed: {errors[0]}", "check the Docker daemon's log")
        image_id = _image_id(client, plan.tag) or ""
        if previous_id and previous_id != image_id:
            drop_if_untagged(client, previous_id)  # the base it replaced, unless an image is built on it
        progress.done(f"built {plan.tag} ({image_id[7:19]}) from debian {plan.suite}")
        return image_id
    finally:
        _unmount_below(root)
        shutil.rmtree(root, ignore_errors=True)


def _unmount_below(root: Path) -> None:
    """debootstrap mounts proc/sys inside the target; a failed run can leave them mounted."""
    try:
        # /proc/mounts writes a space in a path as \040 (tab \011, newline \012, backslash \134)
        mounts = [re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[1])
                  for line in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        return
    for m in sorted((m for m in mounts if m.startswith(str(root) + "/")), reverse=True):
        subprocess.run(["umount", "-l", m], check=False, capture_output=True)
