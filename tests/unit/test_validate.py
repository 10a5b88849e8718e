"""ddpctl.validate on hand-written manifests (good and bad, each kind), its schema engine against the jsonschema
reference implementation, and its bounded YAML reading. The schemas are the real bundled ones."""

import copy
import random
import time
from pathlib import Path

import jsonschema
import pytest
import yaml

from ddpctl import schemas
from ddpctl.validate import (
    ManifestError,
    Report,
    check_document,
    format_path,
    kind_of,
    schema_validator,
    validate_paths,
    validate_text,
)
from ddpctl.validate.k8s import CEL_RULES
from ddpctl.validate.loader import load_documents
from ddpctl.validate.schema import KNOWN_KEYWORDS, Validator, keywords

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "golden"

# ------------------------------------------------------------------------- hand-written manifests

COMPOSE_GOOD = """\
x-common: &common
  image: pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime
  ipc: host
  environment:
    - NCCL_DEBUG=WARN
    - HF_TOKEN
services:
  trainer-0:
    <<: *common
    command: ["torchrun", "--nnodes", "2", "--node-rank", "0", "train.py"]
    volumes: ["./code:/workspace", "ckpt:/ckpt"]
    networks: [train]
    deploy:
      resources:
        reservations:
          devices: [{driver: nvidia, count: 2, capabilities: [gpu]}]
  trainer-1:
    <<: *common
    command: torchrun --nnodes 2 --node-rank 1 train.py
    depends_on: [trainer-0]
    networks: [train]
networks:
  train: {driver: bridge}
volumes:
  ckpt: {}
"""

PYTORCHJOB_GOOD = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: mnist
  namespace: team-a
  labels: {app.kubernetes.io/part-of: research, kueue.x-k8s.io/queue-name: team-a}
spec:
  nprocPerNode: "2"
  runPolicy: {cleanPodPolicy: None, ttlSecondsAfterFinished: 600}
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - name: pytorch
              image: docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727
              command: [python3, /opt/pytorch-mnist/mnist.py, --epochs=1]
              env:
                - {name: HF_TOKEN, valueFrom: {secretKeyRef: {name: hf, key: token}}}
              resources: {limits: {nvidia.com/gpu: 2, memory: 16Gi}, requests: {cpu: 500m, memory: 8Gi}}
    Worker:
      replicas: 3
      restartPolicy: OnFailure
      template:
        spec:
          tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
          containers:
            - name: pytorch
              image: docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727
              command: [python3, /opt/pytorch-mnist/mnist.py, --epochs=1]
"""

TRAINJOB_GOOD = """\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: pytorch-simple
spec:
  runtimeRef:
    name: torch-distributed
  trainer:
    numNodes: 2
    numProcPerNode: 4
    image: pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime
    command: [torchrun, train.py]
    env: [{name: WANDB_MODE, value: offline}]
    resourcesPerNode:
      limits: {nvidia.com/gpu: 4}
"""


def problems(text, kind=None):
    docs = load_documents(text, "f.yaml")
    assert len(docs) == 1
    k = kind or kind_of(docs[0].data)
    return [f"{format_path(i.path)}: {i.message}" for i in check_document(docs[0].data, k)]


@pytest.mark.parametrize("text, kind", [(COMPOSE_GOOD, "compose"), (PYTORCHJOB_GOOD, "PyTorchJob"),
                                        (TRAINJOB_GOOD, "TrainJob")])
def test_hand_written_good_manifests_pass(text, kind):
    assert kind_of(yaml.safe_load(text)) == kind
    assert problems(text) == []


def _edit(text, fn):
    doc = yaml.safe_load(text)
    fn(doc)
    return yaml.safe_dump(doc, sort_keys=False)


def _svc(d):
    return d["services"]["trainer-0"]


def _pj_c(d, r="Master"):
    return d["spec"]["pytorchReplicaSpecs"][r]["template"]["spec"]["containers"][0]


BAD = [
    # compose
    ("compose-unknown-key", COMPOSE_GOOD, lambda d: _svc(d).update({"shm-size": "1g"}),
     "services.trainer-0.shm-size: is not a known field (did you mean 'shm_size'?)"),
    ("compose-gpus", COMPOSE_GOOD, lambda d: _svc(d).update({"gpus": "all"}),
     "services.trainer-0.gpus: docker-compose 1.29.2 rejects"),
    ("compose-name", COMPOSE_GOOD, lambda d: d.update({"name": "x"}), "name: docker-compose 1.29.2 rejects"),
    ("compose-nan-cpus", COMPOSE_GOOD, lambda d: _svc(d).update({"cpus": float("nan")}),
     "services.trainer-0.cpus: nan is not a finite number"),
    ("compose-undeclared-volume", COMPOSE_GOOD, lambda d: _svc(d).update({"volumes": ["data:/data"]}),
     "services.trainer-0.volumes[0]: named volume 'data' is not declared"),
    ("compose-relative-as-name", COMPOSE_GOOD, lambda d: _svc(d).update({"volumes": ["code/x:/x"]}),
     "is read as a volume name"),
    ("compose-two-mounts-one-target", COMPOSE_GOOD, lambda d: _svc(d).update({"volumes": ["/a:/x", "/b:/x"]}),
     "services.trainer-0.volumes[1]: /x is mounted twice"),
    ("compose-depends", COMPOSE_GOOD, lambda d: _svc(d).update({"depends_on": ["nobody"]}),
     "names 'nobody', which is not a service"),
    ("compose-network", COMPOSE_GOOD, lambda d: _svc(d).update({"networks": ["other"]}),
     "network 'other' is not declared"),
    ("compose-wrong-type", COMPOSE_GOOD, lambda d: _svc(d).update({"command": 5}),
     "services.trainer-0.command: must be null or string or array, got integer 5"),
    ("compose-env-name", COMPOSE_GOOD, lambda d: _svc(d).update({"environment": {"A=B": "x"}}),
     "is not a valid environment variable name"),
    # docker-compose 1.29.2's `config` accepts 2Gi, but `up` fails in docker-py's parse_bytes (tried by hand)
    ("compose-size-gi", COMPOSE_GOOD, lambda d: _svc(d).update({"shm_size": "2Gi"}),
     "services.trainer-0.shm_size: '2Gi' is not a size docker-compose reads"),
    # PyTorchJob
    ("pj-priority-class", PYTORCHJOB_GOOD, lambda d: d["spec"]["runPolicy"].update(
        {"schedulingPolicy": {"priorityClass": "High_Priority"}}),
     "spec.runPolicy.schedulingPolicy.priorityClass: name 'High_Priority' is not a DNS-1123 subdomain"),
    ("pj-unknown-key", PYTORCHJOB_GOOD, lambda d: _pj_c(d).update({"bogus": 1}),
     "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].bogus: is not a known field"),
    ("pj-name", PYTORCHJOB_GOOD, lambda d: d["metadata"].update({"name": "Bad_Name"}),
     "metadata.name: name 'Bad_Name' is not a DNS-1035 label"),
    ("pj-namespace", PYTORCHJOB_GOOD, lambda d: d["metadata"].update({"namespace": "x" * 64}),
     "metadata.namespace:"),
    ("pj-label-value", PYTORCHJOB_GOOD, lambda d: d["metadata"]["labels"].update({"q": "a" * 64}),
     'metadata.labels.q: label value'),
    ("pj-label-key", PYTORCHJOB_GOOD, lambda d: d["metadata"]["labels"].update({"-bad/key": "a"}),
     'metadata.labels["-bad/key"]: key'),
    ("pj-label-not-string", PYTORCHJOB_GOOD, lambda d: d["metadata"]["labels"].update({"on": True}),
     "metadata.labels.on: must be a string, got boolean"),
    ("pj-ttl-int32", PYTORCHJOB_GOOD, lambda d: d["spec"]["runPolicy"].update({"ttlSecondsAfterFinished": 2**31}),
     "spec.runPolicy.ttlSecondsAfterFinished: 2147483648 does not fit in int32"),
    ("pj-master-replicas", PYTORCHJOB_GOOD, lambda d: d["spec"]["pytorchReplicaSpecs"]["Master"].pop("replicas"),
     "spec.pytorchReplicaSpecs.Master.replicas: must be set to exactly 1"),
    ("pj-replica-type", PYTORCHJOB_GOOD,
     lambda d: d["spec"]["pytorchReplicaSpecs"].update({"Chief": d["spec"]["pytorchReplicaSpecs"]["Worker"]}),
     "replica type 'Chief' is not Master or Worker"),
    ("pj-no-pytorch-container", PYTORCHJOB_GOOD, lambda d: _pj_c(d, "Worker").update({"name": "main"}),
     "needs a container named 'pytorch'"),
    ("pj-env-name", PYTORCHJOB_GOOD, lambda d: _pj_c(d)["env"].append({"name": "1X", "value": "a"}),
     "env[1].name: '1X' is not a valid environment variable name"),
    ("pj-env-duplicate", PYTORCHJOB_GOOD, lambda d: _pj_c(d)["env"].append({"name": "HF_TOKEN", "value": "a"}),
     "env[1]: duplicate entry (name='HF_TOKEN')"),
    ("pj-env-value-and-from", PYTORCHJOB_GOOD, lambda d: _pj_c(d)["env"][0].update({"value": "x"}),
     "env[0]: may not have both value and valueFrom"),
    ("pj-secret-key", PYTORCHJOB_GOOD, lambda d: _pj_c(d)["env"][0]["valueFrom"]["secretKeyRef"].update(
        {"key": "a/b"}), "secretKeyRef.key: 'a/b' is not a valid key"),
    ("pj-quantity", PYTORCHJOB_GOOD, lambda d: _pj_c(d)["resources"]["limits"].update({"memory": "16GB"}),
     "resources.limits.memory: '16GB' is not a Kubernetes quantity"),
    ("pj-request-over-limit", PYTORCHJOB_GOOD, lambda d: _pj_c(d)["resources"]["requests"].update(
        {"memory": "32Gi"}), "resources.requests.memory: must be less than or equal to the limit"),
    ("pj-fractional-gpu", PYTORCHJOB_GOOD, lambda d: _pj_c(d)["resources"]["limits"].update(
        {"nvidia.com/gpu": "0.5"}), "extended resource nvidia.com/gpu must be a whole number"),
    ("pj-toleration-operator", PYTORCHJOB_GOOD,
     lambda d: d["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["tolerations"][0].update(
         {"operator": "Sometimes"}), "tolerations[0]: toleration operator 'Sometimes' is not Exists or Equal"),
    ("pj-toleration-seconds", PYTORCHJOB_GOOD,
     lambda d: d["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["tolerations"][0].update(
         {"tolerationSeconds": "soon"}), "tolerationSeconds: must be integer, got string 'soon'"),
    ("pj-mount-without-volume", PYTORCHJOB_GOOD, lambda d: _pj_c(d).update(
        {"volumeMounts": [{"name": "data", "mountPath": "/data"}]}), "names no volume of the pod ('data')"),
    ("pj-hostpath-dotdot", PYTORCHJOB_GOOD, lambda d: d["spec"]["pytorchReplicaSpecs"]["Master"]["template"]
     ["spec"].update({"volumes": [{"name": "d", "hostPath": {"path": "/data/../etc"}}]}), "must not contain '..'"),
    ("pj-port", PYTORCHJOB_GOOD, lambda d: _pj_c(d).update({"ports": [{"name": "pytorchjob-port",
                                                                        "containerPort": 70000}]}),
     "ports[0].containerPort: must be between 1 and 65535"),
    ("pj-restart-policy", PYTORCHJOB_GOOD,
     lambda d: d["spec"]["pytorchReplicaSpecs"]["Master"].update({"restartPolicy": "Sometimes"}),
     "spec.pytorchReplicaSpecs.Master.restartPolicy: must be one of"),
    ("pj-metadata-unknown", PYTORCHJOB_GOOD, lambda d: d["metadata"].update({"nmae": "x"}),
     "metadata.nmae: is not a known field of ObjectMeta"),
    # TrainJob
    ("tj-nproc-string", TRAINJOB_GOOD, lambda d: d["spec"]["trainer"].update({"numProcPerNode": "auto"}),
     "spec.trainer.numProcPerNode: must be integer, got string 'auto'"),
    ("tj-host-network", TRAINJOB_GOOD, lambda d: d["spec"]["trainer"].update({"hostNetwork": True}),
     "spec.trainer.hostNetwork: is not a known field"),
    ("tj-pet-env", TRAINJOB_GOOD, lambda d: d["spec"]["trainer"]["env"].append({"name": "PET_NNODES", "value": "3"}),
     "spec.trainer.env[1].name: PET_NNODES is set by the torch plugin"),
    ("tj-name-cel", TRAINJOB_GOOD, lambda d: d["metadata"].update({"name": "9lives"}),
     "metadata.name: name '9lives' is not a DNS-1035 label"),
    ("tj-runtime-name", TRAINJOB_GOOD, lambda d: d["spec"]["runtimeRef"].update({"name": "Torch Distributed"}),
     "spec.runtimeRef.name: name 'Torch Distributed' is not a DNS-1123 subdomain"),
    ("tj-missing-runtime", TRAINJOB_GOOD, lambda d: d["spec"].pop("runtimeRef"), "spec.runtimeRef: is required"),
    ("tj-null-required", TRAINJOB_GOOD, lambda d: d["spec"]["runtimeRef"].update({"name": None}),
     "spec.runtimeRef.name: is required"),
    ("tj-managed-by", TRAINJOB_GOOD, lambda d: d["spec"].update({"managedBy": "me"}),
     "spec.managedBy: ManagedBy must be"),
    ("tj-num-nodes-int32", TRAINJOB_GOOD, lambda d: d["spec"]["trainer"].update({"numNodes": 2**40}),
     "spec.trainer.numNodes: 1099511627776 does not fit in int32"),
]


@pytest.mark.parametrize("case, text, edit, needle", BAD, ids=[b[0] for b in BAD])
def test_hand_written_bad_manifests_name_the_problem(case, text, edit, needle):
    found = problems(_edit(text, edit))
    assert any(needle in p for p in found), found


def test_null_is_pruned_in_kubernetes_but_a_type_error_in_compose():
    assert problems(_edit(TRAINJOB_GOOD, lambda d: d["spec"]["trainer"].update({"image": None}))) == []
    found = problems(_edit(COMPOSE_GOOD, lambda d: _svc(d).update({"ipc": None})))
    assert any(p.startswith("services.trainer-0.ipc: must be string") for p in found), found


def test_every_rendered_golden_manifest_validates():
    report = validate_paths([str(GOLDEN)])
    assert report.problems == [] and report.errors == []
    assert report.kinds["compose"] >= 13 and report.kinds["PyTorchJob"] >= 9 and report.kinds["TrainJob"] >= 6


def test_checked_in_examples_validate():
    report = validate_paths([str(REPO / "compose"), str(REPO / "k8s")])
    assert report.errors == [], [str(p) for p in report.errors]


# ------------------------------------------------------------------------------- the schema engine


def test_the_bundled_schemas_use_only_known_keywords():
    for schema in (schemas.compose_schema(), schemas.crd_schema("PyTorchJob"), schemas.crd_schema("TrainJob")):
        assert keywords(schema) - KNOWN_KEYWORDS == set()


def test_every_cel_rule_of_the_crds_is_evaluated_or_update_only():
    rules = set()

    def walk(node):
        if isinstance(node, dict):
            for r in node.get("x-kubernetes-validations", ()):
                rules.add(r["rule"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    for kind in ("PyTorchJob", "TrainJob"):
        walk(schemas.crd_schema(kind))
    assert rules and rules <= set(CEL_RULES)


def _mutations(doc, rng, n):
    """Random edits of a valid document: a value of another type, a deleted key, an added key, an enum typo."""
    paths = []

    def walk(node, path):
        if isinstance(node, dict):
            for k, v in node.items():
                paths.append(path + (k,))
                walk(v, path + (k,))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                paths.append(path + (i,))
                walk(v, path + (i,))

    walk(doc, ())
    replacements = [0, -1, 7, 1.5, "", "x", "Never", True, None, [], ["a"], {}, {"a": 1}, [{"name": "x"}]]
    for _ in range(n):
        d = copy.deepcopy(doc)
        path = rng.choice(paths)
        parent = d
        for p in path[:-1]:
            parent = parent[p]
        op = rng.random()
        if op < 0.6:
            parent[path[-1]] = rng.choice(replacements)
        elif op < 0.8 and isinstance(parent, dict):
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent["zz" + str(path[-1])] = 1
        yield d


def _goldens(kind):
    out = []
    for f in sorted(GOLDEN.rglob("*.yaml")):
        for d in load_documents(f.read_text(), str(f)):
            if kind_of(d.data) == kind:
                out.append(d.data)
    return out


@pytest.mark.parametrize("kind", ["compose", "PyTorchJob", "TrainJob"])
def test_agrees_with_jsonschema_on_draft7_semantics(kind):
    """Non-strict, non-Kubernetes mode is plain Draft 7: on valid documents and 300 random edits of them the
    verdict (valid or not) is the reference implementation's."""
    schema = schemas.compose_schema() if kind == "compose" else schemas.crd_schema(kind)
    ref = jsonschema.Draft7Validator(schema)
    mine = Validator(schema, strict=False, kubernetes=False)
    rng = random.Random(14)
    docs = _goldens(kind)
    checked = disagreements = invalid = 0
    for i in range(300):
        for d in _mutations(docs[i % len(docs)], rng, 1):
            ref_ok = not any(True for _ in ref.iter_errors(d))
            mine_ok = not mine.issues(d)
            checked += 1
            invalid += not ref_ok
            if ref_ok != mine_ok:
                disagreements += 1
                print("disagree", ref_ok, mine_ok, [str(e.message) for e in ref.iter_errors(d)][:2],
                      mine.issues(d)[:2])
    assert checked == 300 and invalid > 30  # the edits do break documents
    assert disagreements == 0


def test_strict_mode_adds_unknown_key_errors_only():
    schema = schemas.crd_schema("TrainJob")
    doc = yaml.safe_load(TRAINJOB_GOOD)
    doc["spec"]["trainer"]["hostNetwork"] = True
    assert Validator(schema, strict=False).issues(doc) == []
    assert [i.message for i in Validator(schema, strict=True).issues(doc)] == ["is not a known field"]


def test_schema_validator_is_cached_and_fast():
    schema_validator("PyTorchJob")
    doc = yaml.safe_load((GOLDEN / "pytorchjob" / "gpu-2x8.yaml").read_text())
    t0 = time.perf_counter()
    for _ in range(20):
        check_document(doc, "PyTorchJob")
    assert time.perf_counter() - t0 < 5  # generous: a smoke check that nothing is exponential


# --------------------------------------------------------------------------------------- reading


def test_billion_laughs_stops_at_the_node_limit_quickly():
    lol = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    prev = "a"
    for i in range(1, 10):
        lol += f"{chr(97 + i)}: &{chr(97 + i)} [" + ", ".join([f"*{prev}"] * 10) + "]\n"
        prev = chr(97 + i)
    t0 = time.perf_counter()
    with pytest.raises(ManifestError, match="expands to more than"):
        load_documents(lol, "lol.yaml")
    assert time.perf_counter() - t0 < 30


def test_a_file_of_very_many_values_is_refused_while_it_is_read():
    from ddpctl.validate.loader import MAX_NODES

    # counted as the parser makes them, not after the whole file is built: one flow list, and many documents
    for text in ("[" + ",".join(["1"] * (MAX_NODES + 10)) + "]", "\n---\n".join(["a: 1"] * (MAX_NODES // 2 + 10))):
        with pytest.raises(ManifestError, match=f"holds more than {MAX_NODES:,} values"):
            load_documents(text, "big.yaml")
    assert len(load_documents("[" + ",".join(["1"] * 1000) + "]", "fine.yaml")[0].data) == 1000


@pytest.mark.parametrize("text, needle", [
    ("a: &x [*x]\n", "recursive alias"),
    ("a: !!python/object:os.system x\n", "unknown tag"),
    ("a: !custom x\n", "unknown tag"),
    ("a: " + "9" * 5000 + "\n", "not valid YAML"),
    ("a: " + "[" * 200 + "]" * 200 + "\n", "nested"),
    ("a: [1\n", "not valid YAML"),
])
def test_unreadable_yaml_is_one_manifest_error(text, needle):
    with pytest.raises(ManifestError, match=needle) as info:
        load_documents(text, "f.yaml")
    assert "\n" not in str(info.value)


def test_merge_keys_anchors_and_duplicate_keys():
    docs = load_documents("base: &b {x: 1, y: 2}\nc:\n  <<: *b\n  y: 3\nc2: 1\nc2: 2\n", "f.yaml")
    assert docs[0].data["c"] == {"x": 1, "y": 3}
    assert docs[0].duplicates == [(("c2",), "c2")]
    report = validate_text("services:\n  a: {image: x}\n  a: {image: y}\n", "dup.yaml")
    assert [str(p) for p in report.errors] == ["dup.yaml:services.a: key 'a' appears twice"]


def test_multi_document_files_number_their_documents():
    text = PYTORCHJOB_GOOD + "---\n" + _edit(TRAINJOB_GOOD, lambda d: d["spec"]["trainer"].update({"numNodes": "x"}))
    report = validate_text(text, "both.yaml")
    assert [str(p) for p in report.errors] == [
        "both.yaml#2:spec.trainer.numNodes: must be integer, got string 'x'"]
    assert report.kinds == {"PyTorchJob": 1, "TrainJob": 1}


def test_unknown_kinds_are_reading_errors_unless_skipped():
    svc = "apiVersion: v1\nkind: Service\nmetadata: {name: x}\n"
    with pytest.raises(ManifestError, match="kind 'Service'"):
        validate_text(svc, "svc.yaml")
    with pytest.raises(ManifestError, match="kind 'PyTorchJob' of apiVersion 'kubeflow.org/v2'"):
        validate_text(PYTORCHJOB_GOOD.replace("kubeflow.org/v1", "kubeflow.org/v2"), "pj.yaml")
    report = Report()
    validate_text(svc + "---\n" + TRAINJOB_GOOD, "mixed.yaml", report, skip_unknown=True)
    assert report.skipped == 1 and report.kinds == {"TrainJob": 1}


def test_a_job_spec_is_not_taken_for_a_compose_file():
    with pytest.raises(ManifestError, match="a ddpctl job spec"):
        validate_text("name: resnet\nnodes: 2\nenv: {A: 1}\n", "job.yaml")
    assert kind_of({"volumes": {"a": {}}, "x-defaults": {}}) == "compose"


def test_problem_lines_are_one_line_whatever_the_value():
    doc = yaml.safe_load(PYTORCHJOB_GOOD)
    doc["metadata"]["labels"]["k"] = "a\nb"
    report = validate_text(yaml.safe_dump(doc), "nl.yaml")
    assert report.errors and all("\n" not in str(p) for p in report.problems)


def test_secret_looking_literal_values_are_warnings():
    doc = yaml.safe_load(TRAINJOB_GOOD)
    doc["spec"]["trainer"]["env"].append({"name": "HF_TOKEN", "value": "hf_abc"})
    report = validate_text(yaml.safe_dump(doc), "tj.yaml")
    assert report.errors == []
    assert [p.path for p in report.problems] == [("spec", "trainer", "env", 1, "value")]
    assert "hf_abc" not in str(report.problems[0])


@pytest.mark.parametrize("kind", ["compose", "PyTorchJob", "TrainJob"])
def test_never_raises_on_random_edits(kind):
    """Hostile documents give problems, never an exception: 400 random edits per kind, every check on."""
    rng = random.Random(1414)
    docs = _goldens(kind)
    for i in range(400):
        for d in _mutations(docs[i % len(docs)], rng, 1):
            for issue in check_document(d, kind):
                assert isinstance(issue.message, str) and issue.message
