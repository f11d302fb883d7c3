"""Which source a run used: the git commit of the checkout wavemla is imported from, for benchmark records.

``source_revision()`` is that checkout's ``HEAD``, with ``-dirty`` appended when a tracked file differs from it (a
run on edits, or on a working tree copied onto another machine beside an older ``.git``), and ``None`` where wavemla
is not imported from a git checkout of its own: an installed wheel, or a package directory that some other
repository holds (a virtual environment inside a project's repository). Untracked files do not count.

Example::

    source_revision()  # '9b88683c…' or '9b88683c…-dirty' in a checkout, None for an installed wheel
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import wavemla

# The package's place in its own repository: src/wavemla/
_PACKAGE_IN_REPO = Path("src") / "wavemla"


def source_revision(package_dir: Path | None = None) -> str | None:
    """``HEAD`` of the git checkout holding ``package_dir`` (default: the imported wavemla package) as its
    ``src/wavemla``, ``-dirty`` appended where tracked files differ from it; ``None`` where there is no such
    checkout or git cannot say."""
    here = Path(wavemla.__file__).resolve().parent if package_dir is None else package_dir.resolve()
    top = _git(here, "rev-parse", "--show-toplevel")
    if top is None or (Path(top).resolve() / _PACKAGE_IN_REPO) != here:
        return None
    sha = _git(here, "rev-parse", "HEAD")
    if sha is None:  # a repository with no commit yet
        return None
    changes = _git(here, "status", "--porcelain", "--untracked-files=no")
    if changes is None:
        return None
    return f"{sha}-dirty" if changes else sha


def _git(cwd: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()
