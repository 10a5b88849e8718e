"""A property test over random, partly hostile workspace trees and requirements files.

Trees: files (some named like credentials, some holding a private key), symbolic links (to files and
directories inside, outside, dangling, chained, absolute and relative) and ``.dockerignore`` lines (with ``!``
exceptions). :func:`ddpctl.images.workspace.scan` either refuses with one line (a UsageError, exit 2), or what
it takes, and the build context tar made from it, holds no byte of the host file outside the workspace, no
link out of ``/workspace`` and no credential-looking file (unless allowed).

Requirements files: lines from a pool of requirement and option fragments (glued, prefixed, continued,
commented). The check either refuses, or pip's own parser (the installed pip's ``req_file`` preprocessing and
option table: the real consumer) finds no option that changes the index, adds a source or names a file.

Seeded (derandomize=True) and bounded; ``DDPCTL_HOSTILE_EXAMPLES`` changes the count.
"""

from __future__ import annotations

import os
import shlex
import shutil
import tarfile
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddpctl.errors import UsageError
from ddpctl.images import requirements_file, workspace_tree
from ddpctl.images import workspace as ws
from ddpctl.images.workspace_build import code_context

pytestmark = pytest.mark.slow

EXAMPLES = int(os.environ.get("DDPCTL_HOSTILE_EXAMPLES", "200"))
SETTINGS = settings(derandomize=True, max_examples=EXAMPLES, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SECRET = b"HOST-SECRET-7d1f"

names = st.sampled_from(["a.py", "b.txt", "data", "pkg/m.py", "pkg/sub/x.bin", ".env", ".env.example", "id_rsa",
                         "conf/.netrc", ".ssh/config", ".aws/credentials", "k.pem", "ca.pem", "t.key", "prod.env",
                         ".docker/config.json", "deep/a/b/c.py"])
targets = st.sampled_from(["OUT_FILE", "OUT_DIR", "a.py", "pkg", "pkg/m.py", "missing", "../outside", "/etc",
                           "/nonexistent", ".", "..", "SELF_ABS"])
entries = st.lists(st.tuples(st.sampled_from(["file", "key", "link"]), names, targets), max_size=8)
ignores = st.lists(st.sampled_from(["*.pem", ".env", "!.env", "pkg", "!pkg/m.py", "data", ".ssh", "**/*.key",
                                    "conf", "id_rsa", "link*", "prod.env", "!k.pem"]), max_size=4)


def _make_tree(base: Path, spec, ignore) -> Path:
    root = base / "proj"
    root.mkdir()
    (root / "train.py").write_text("print(1)\n")
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_bytes(SECRET)
    for kind, rel, target in spec:
        path = root / rel
        if path.exists() or path.is_symlink():
            continue
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            continue
        if kind == "file":
            path.write_text("x\n")
        elif kind == "key":
            path.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n")
        else:
            text = {"OUT_FILE": str(outside / "secret.txt"), "OUT_DIR": str(outside),
                    "SELF_ABS": str(root / "train.py")}.get(target, target)
            os.symlink(text, path)
    if ignore:
        (root / ".dockerignore").write_text("\n".join(ignore) + "\n")
    return root


@SETTINGS
@given(spec=entries, ignore=ignores, allow=st.booleans())
def test_a_workspace_scan_refuses_or_takes_nothing_from_outside(spec, ignore, allow):
    base = Path(tempfile.mkdtemp(prefix="ddpctl-wsprop-"))
    try:
        root = _make_tree(base, spec, ignore)
        try:
            got = ws.scan(root, allow_credentials=allow)
        except UsageError as exc:
            assert exc.exit_code == 2 and "\n" not in exc.message
            return
        real = str(root.resolve())
        for f in got.files:
            if f.link is None:
                assert os.path.realpath(f.path).startswith(real + "/")
                assert SECRET not in f.path.read_bytes()
                assert allow or not workspace_tree.credential(f.rel, f.path), f.rel
            else:  # the link, as it will be in the image, stays in /workspace
                pointed = os.path.normpath(os.path.join("/workspace", os.path.dirname(f.rel), f.link))
                assert pointed == "/workspace" or pointed.startswith("/workspace/"), (f.rel, f.link)
        with tarfile.open(fileobj=code_context(got, "base:1", {}), mode="r") as tar:
            for m in tar.getmembers():
                if m.isfile():
                    assert SECRET not in tar.extractfile(m).read()
                assert not m.islnk()
    finally:
        shutil.rmtree(base, ignore_errors=True)


fragments = st.sampled_from([
    "torch", "numpy>=1.26", "pkg[a]; python_version>'3.8'", "x==1", "--hash=sha256:" + "a" * 64, "--pre",
    "--prefer-binary", "--only-binary=:all:", "-i", "-ihttps://e.example/s", "--index-url", "--index-url=https://e",
    "--extra-index-url", "--extra-index=https://e", "--ind", "https://e.example/s", "--no-index", "--no-i", "-f",
    "-f/tmp", "--find-links=https://e", "-c", "c.txt", "-r", "-rother.txt", "-e", ".", "./pkg", "/abs/p.whl",
    "p.whl", "pkg @ file:///etc/x", "pkg @ https://h.example/p.whl", "pkg @ https://u:p@h/p.whl", "--trusted-host",
    "h.example", "git+https://h.example/r", "#", "# -i https://e", "\\", "\t", "-C", "k=v", "--use-feature=x",
    "--require-hashes", "--no-binary", ":none:", "'", '"', "${HOME}", "-", "--",
])
lines = st.lists(st.lists(fragments, min_size=1, max_size=4).map(" ".join), min_size=1, max_size=5)

FORBIDDEN = {"index_url", "extra_index_urls", "no_index", "find_links", "constraints", "requirements", "editables",
             "trusted_hosts", "features_enabled", "config_settings"}


def _pip_view(text: str) -> list[tuple[str, dict]]:
    """Each logical line as the installed pip reads it: (requirement part, options given)."""
    from pip._internal.req import req_file

    parser = req_file.build_parser()
    out = []
    for _, line in req_file.preprocess(text):
        args, opts = req_file.break_args_options(line)
        defaults = parser.get_default_values()
        values, _ = parser.parse_args(shlex.split(opts), defaults)
        given = {k: v for k, v in vars(values).items() if v != getattr(parser.get_default_values(), k, None)}
        out.append((args, given))
    return out


@SETTINGS
@given(text=lines.map("\n".join))
def test_a_requirements_file_passes_only_when_pip_sees_no_other_source(text):
    try:
        requirements_file.check(Path("requirements.txt"), text)
    except UsageError as exc:
        assert exc.exit_code == 2 and "\n" not in exc.message and "u:p@" not in exc.message
        return
    from pip._internal.exceptions import CommandError
    from pip._internal.req.req_file import OptionParsingError

    try:
        view = _pip_view(text)
    except (CommandError, OptionParsingError, ValueError):
        return  # pip itself refuses the file: the build fails in pip, from no other source
    for args, opts in view:
        assert not FORBIDDEN & set(opts), (text, opts)
        assert not args.startswith((".", "/")) and "file:" not in args and "u:p@" not in args, text


# ------------------------------------------------------------------ job files with workspace and host sections

PASSWORD = "pw-Q7z"
host_word = st.sampled_from(["gpu1", "10.0.0.2", "-oProxyCommand=touch%20pwned", "a;id", "a$(id)", "[::1]",
                             "gpu-2.example", "-x", "h h", "me@gpu1", f"me:{PASSWORD}@gpu1", "gpu1/x"])
docker_host = st.one_of(st.builds(lambda s, h: f"{s}://{h}", st.sampled_from(["tcp", "ssh", "unix", "ftp"]), host_word),
                        st.sampled_from(["default", "-H", "ctx.1", "unix:///var/run/docker.sock"]))
env_value = st.sampled_from([f"postgres://app:{PASSWORD}@db:5432/x", f"https://{PASSWORD}@git.example/r", "plain",
                             f"a://u:{PASSWORD}@h b://v:{PASSWORD}@i"])
job_files = st.fixed_dictionaries({}, optional={
    "workspace": st.fixed_dictionaries({}, optional={"dir": st.sampled_from([".", "/etc", "~", "sub"]),
                                                     "repository": st.sampled_from(["127.0.0.1:5000/a/b", "a/b",
                                                                                    "Bad Repo"]),
                                                     "requirements": st.sampled_from(["r.txt", "/etc/passwd"])}),
    "docker_hosts": st.lists(docker_host, min_size=1, max_size=2),
    "hosts": st.lists(host_word, min_size=1, max_size=2),
    "env": st.dictionaries(st.sampled_from(["DATABASE_URL", "GIT_URL", "HF_TOKEN", "PGPASSWORD", "A"]), env_value,
                           max_size=3),
    "nodes": st.sampled_from([1, 2]),
})


@SETTINGS
@given(doc=job_files, command=st.sampled_from([("render", "compose"), ("render", "pytorchjob"),
                                               ("render", "slurm", "--container", "pyxis"), ("up", "--dry-run")]))
def test_a_job_file_never_builds_connects_unchecked_or_prints_a_password(doc, command):
    import contextlib
    import io

    import yaml

    from ddpctl import rules
    from ddpctl.cli.main import main
    from ddpctl.errors import EngineError

    contacted = []

    def connect(host=None, *a, **k):
        if host is None:  # DOCKER_HOST's engine: a build, a push or a local run, a failure of the property
            raise AssertionError("the job file alone reached the Docker Engine")
        contacted.append(host)  # a named Docker host: only after its name passed the --hosts rule
        raise EngineError(f"cannot reach Docker host {host.given}", "start it")

    import ddpctl.dockerengine

    base = Path(tempfile.mkdtemp(prefix="ddpctl-jobprop-"))
    saved = (ddpctl.dockerengine.connect, os.getcwd(), os.environ.get("DDPCTL_DOCKER_HOSTS"))
    ddpctl.dockerengine.connect = connect
    os.environ["DDPCTL_DOCKER_HOSTS"] = ""
    out, err = io.StringIO(), io.StringIO()
    try:
        (base / "train.py").write_text("print(1)\n")
        job = base / "job.yaml"
        job.write_text(yaml.safe_dump(doc))
        os.chdir(base)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exc:
            main([*command, "-f", str(job)])
    finally:
        ddpctl.dockerengine.connect = saved[0]
        os.chdir(saved[1])
        if saved[2] is None:
            os.environ.pop("DDPCTL_DOCKER_HOSTS", None)
        else:
            os.environ["DDPCTL_DOCKER_HOSTS"] = saved[2]
        shutil.rmtree(base, ignore_errors=True)
    code, text = exc.value.code, out.getvalue() + err.getvalue()
    assert "Traceback" not in text and not Path("pwned").exists()
    assert code in (0, 2) or (code == 1 and contacted), (code, text)
    if code != 0:
        assert len(err.getvalue().splitlines()) == 1 and out.getvalue() == "", text
    for host in contacted:  # only hosts that passed the --hosts rule are ever connected to
        assert host.address is None or rules.HOST_RE.fullmatch(host.address.strip("[]")), host
    if command[0] == "up" or code != 0:  # a dry run and an error line never show a password
        assert PASSWORD not in text, text
