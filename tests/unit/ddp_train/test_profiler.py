"""ddp_train.observe.profiler: --profile-dir's files, and a directory that cannot be written by the time the
profile is (one warning line; the run goes on, no traceback)."""

from __future__ import annotations

import torch

from ddp_train.observe.profiler import StepProfiler


class _Timer:
    def pause(self):
        pass

    def resume(self, step):
        pass


def _profile(out_dir, said):
    prof = StepProfiler(str(out_dir), 1, 0, torch.device("cpu"), 0, 2, 0)
    prof.before(prof.start)
    torch.ones(4).sum()
    prof.after(prof.end, _Timer(), said.append)
    return prof


def test_the_profile_is_written(tmp_path):
    said = []
    _profile(tmp_path / "prof", said)
    assert sorted(p.name for p in (tmp_path / "prof").iterdir()) == ["kernels-rank0.txt", "trace-rank0.json.gz"]
    assert said == [f"ddp-train: profile of 1 steps written to {tmp_path / 'prof'}"]


def test_a_profile_dir_that_became_a_file_is_a_warning_not_a_crash(tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    said = []
    prof = _profile(tmp_path / "afile", said)
    assert prof.prof is None and said == []
    err = capsys.readouterr().err
    assert err.startswith(f"ddp-train: warning: cannot write the profile to {tmp_path / 'afile'} (") and \
        err.count("\n") == 1 and "the run goes on without it" in err
