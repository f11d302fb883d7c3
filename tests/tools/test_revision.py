"""wavemla.tools.revision: the commit a benchmark record names."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

import wavemla
from wavemla.tools import envinfo
from wavemla.tools.revision import source_revision

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def _repo(root: Path, package: Path) -> Path:
    """A repository at ``root`` whose one commit holds ``package/__init__.py``."""
    (root / package).mkdir(parents=True)
    (root / package / "__init__.py").write_text("x = 1\n")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    return root / package


def test_checkout_head_and_its_edits(tmp_path: Path) -> None:
    pkg = _repo(tmp_path / "repo", Path("src") / "wavemla")
    head = _git(pkg, "rev-parse", "HEAD")
    assert source_revision(pkg) == head
    (pkg / "new.py").write_text("untracked\n")  # untracked files do not make it dirty
    assert source_revision(pkg) == head
    (pkg / "__init__.py").write_text("x = 2\n")
    assert source_revision(pkg) == f"{head}-dirty"


def test_no_revision_outside_a_checkout_of_wavemla(tmp_path: Path) -> None:
    bare = tmp_path / "site-packages" / "wavemla"
    bare.mkdir(parents=True)
    assert source_revision(bare) is None  # an installed package: no repository around it
    # a repository that holds the package elsewhere than src/wavemla (a virtual environment inside a project)
    other = _repo(tmp_path / "project", Path(".venv") / "lib" / "site-packages" / "wavemla")
    assert source_revision(other) is None
    # a repository with no commit yet
    empty = tmp_path / "empty" / "src" / "wavemla"
    empty.mkdir(parents=True)
    _git(tmp_path / "empty", "init", "-q")
    assert source_revision(empty) is None


def test_imported_package_and_env_report_agree() -> None:
    here = Path(wavemla.__file__).resolve().parent
    revision = source_revision()
    assert revision == source_revision(here)
    if revision is not None:  # this test tree runs from a checkout
        assert revision.removesuffix("-dirty") == _git(here, "rev-parse", "HEAD")
    info = envinfo.collect()
    assert info["source"] == revision
    assert (
        envinfo.format_text(info)
        .splitlines()[0]
        .endswith(f"(source {revision})" if revision else "(not a git checkout)")
    )
