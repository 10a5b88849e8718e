"""Checks of a cluster's client tools: kubectl, context and CRDs; Slurm commands, partitions, container runtime."""

from __future__ import annotations

from ddpctl.doctor.model import CRDS, Check, Options, Probes

# -------------------------------------------------------------------------------- cluster checks

def check_kubectl(opts: Options, p: Probes, state: dict) -> Check:
    path = p.which("kubectl")
    state["kubectl"] = path
    if not path:
        return Check("kubectl", "fail", "kubectl is not on PATH",
                     "install kubectl (https://kubernetes.io/docs/tasks/tools/) or add it to PATH")
    return Check("kubectl", "ok", path)


def check_context(opts: Options, p: Probes, state: dict) -> Check:
    if not state.get("kubectl"):
        return Check("kube context", "fail", "no kubectl", "fix the kubectl check first")
    rc, out, err = p.run(["kubectl", "config", "current-context"])
    if rc != 0 or not out.strip():
        return Check("kube context", "fail", f"no current context ({(err or out).strip()[:160] or rc})",
                     "select one with 'kubectl config use-context NAME' (or set KUBECONFIG)")
    state["context"] = out.strip()
    return Check("kube context", "ok", out.strip())


def check_crds(opts: Options, p: Probes, state: dict) -> list[Check]:
    if not state.get("context"):
        return [Check("CRDs", "fail", "no cluster to ask", "fix the kube context check first")]
    rc, out, err = p.run(["kubectl", "get", "crd", "-o", "name"])
    if rc != 0:
        return [Check("CRDs", "fail", f"'kubectl get crd' failed ({(err or out).strip()[:160] or rc})",
                      "check that the cluster answers and that you may list CRDs")]
    names = {line.strip().split("/", 1)[-1] for line in out.splitlines() if line.strip()}
    present = {kind: crd in names for kind, crd in CRDS.items()}
    none = not any(present.values())
    fixes = {"PyTorchJob": "install the Kubeflow Training Operator v1 (kubectl apply --server-side -k "
                           "'github.com/kubeflow/training-operator.git/manifests/overlays/standalone?ref=v1.9.4')",
             "TrainJob": "install Kubeflow Trainer v2 (kubectl apply --server-side -k "
                         "'github.com/kubeflow/trainer.git/manifests/overlays/manager?ref=v2.3.0')"}
    out_checks = []
    for kind, crd in CRDS.items():
        if present[kind]:
            out_checks.append(Check(f"{kind} CRD", "ok", f"{crd} installed"))
        else:
            out_checks.append(Check(f"{kind} CRD", "fail" if none else "warn",
                                    f"{crd} not installed" + ("" if none else
                                                              f" (use 'ddpctl render {'trainjob' if kind == 'PyTorchJob' else 'pytorchjob'}')"),
                                    fixes[kind]))
    return out_checks


def check_slurm_commands(opts: Options, p: Probes, state: dict) -> Check:
    missing = [c for c in ("sbatch", "srun", "scontrol") if not p.which(c)]
    state["slurm"] = not missing
    if missing:
        return Check("slurm commands", "fail", f"not on PATH: {', '.join(missing)}",
                     "run on a Slurm login node, or install the Slurm client (Debian: slurm-client)")
    return Check("slurm commands", "ok", "sbatch, srun and scontrol on PATH")


def check_partitions(opts: Options, p: Probes, state: dict) -> Check:
    if not state.get("slurm"):
        return Check("partitions", "fail", "no scontrol", "fix the slurm commands check first")
    rc, out, err = p.run(["scontrol", "-o", "show", "partition"])
    if rc != 0:
        return Check("partitions", "fail", f"scontrol cannot reach slurmctld ({(err or out).strip()[:160] or rc})",
                     "check slurm.conf / SLURM_CONF and that slurmctld runs ('scontrol ping')")
    parts = {}
    for line in out.splitlines():
        fields = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
        if "PartitionName" in fields:
            parts[fields["PartitionName"]] = fields.get("State", "?")
    if not parts:
        return Check("partitions", "fail", "no partition visible", "ask the admins for access to a partition")
    text = ", ".join(f"{k} ({v})" for k, v in parts.items())
    if opts.partition and opts.partition not in parts:
        return Check("partitions", "fail", f"partition {opts.partition!r} not visible; visible: {text}",
                     "pass one of the visible partitions to --partition")
    if opts.partition and parts[opts.partition] != "UP":
        return Check("partitions", "warn", f"partition {opts.partition!r} is {parts[opts.partition]}",
                     "wait until it is UP or pick another")
    return Check("partitions", "ok", text)


def check_container_runtime(opts: Options, p: Probes, state: dict) -> Check:
    if opts.container == "pyxis":
        rc, out, err = p.run(["srun", "--help"])
        if "--container-image" in out + err:
            return Check("pyxis", "ok", "srun has --container-image (pyxis plugin loaded)")
        return Check("pyxis", "fail", "srun has no --container-image option (no pyxis plugin)",
                     "install pyxis + enroot on the cluster, or use --container apptainer|none")
    found = p.which("apptainer") or p.which("singularity")
    if found:
        return Check("apptainer", "ok", found)
    return Check("apptainer", "fail", "neither apptainer nor singularity is on PATH",
                 "install Apptainer on the nodes (or load its module), or use --container pyxis|none")
