"""Build the wheel, install it into a fresh venv, import agentmesh there: what a user gets.

    python3 dev.py wheel-check     # .ci/run calls it after the tests

The editable install of the tests never sees what the wheel leaves out, nor the warnings a
user's `pip install` prints. This check fails when the build or the install prints a
deprecation warning, when the installed distribution is not
`agentmesh-failwell`, or when `python -c "import agentmesh"` prints or warns anything.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DISTRIBUTION = "agentmesh-failwell"
# setuptools' SetuptoolsDeprecationWarning and pip's "DEPRECATION:" lines both match.
DEPRECATION = re.compile(r"deprecat", re.IGNORECASE)
# Imported from the fresh venv, with every warning shown: it must print nothing.
IMPORT_PROBE = "import agentmesh"
WHERE_PROBE = (
    "import importlib.metadata, agentmesh; "
    f"print(importlib.metadata.version({DISTRIBUTION!r})); print(agentmesh.__file__)"
)


def run(args: list[str | Path], cwd: Path) -> str:
    """Run a command and return its stdout and stderr together; exit if it fails."""
    print("+", " ".join(str(a) for a in args), flush=True)
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("PYTHONWARNINGS", None)  # the probes choose their own warning filters
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    output = done.stdout + done.stderr
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}):\n{output}")
    return output


def matching_lines(output: str, pattern: re.Pattern[str]) -> list[str]:
    """The lines of a command's output that the pattern finds something in."""
    return [line for line in output.splitlines() if pattern.search(line)]


def build_wheel(out: Path) -> Path:
    """Build the sdist, then the wheel from it; a deprecation warning of the build fails.

    Built from the sdist, as pip builds it for a user without a wheel: a stale `build/`
    folder of the checkout cannot leak into it, and a file the sdist misses fails here.
    """
    log = run([sys.executable, "-m", "build", "--outdir", out, ROOT], cwd=ROOT)
    if warned := matching_lines(log, DEPRECATION):
        sys.exit("the build printed deprecation warnings:\n" + "\n".join(warned))
    (wheel,) = out.glob("*.whl")
    return wheel


def install_fresh(wheel: Path, home: Path) -> Path:
    """Install the wheel (not editable) into a new venv; return that venv's python."""
    venv.EnvBuilder(with_pip=True).create(home)
    python = home / ("Scripts" if os.name == "nt" else "bin") / "python"
    log = run([python, "-m", "pip", "install", wheel], cwd=home)
    # Only deprecations: pip's other warnings speak of the machine's index set-up, not of us.
    if warned := matching_lines(log, DEPRECATION):
        sys.exit("pip install printed deprecation warnings:\n" + "\n".join(warned))
    return python


def check_import(python: Path, home: Path) -> None:
    """Importing agentmesh prints nothing, warns nothing, and comes from the wheel."""
    said = run([python, "-W", "always", "-c", IMPORT_PROBE], cwd=home)
    if said:
        sys.exit(f"`python -c {IMPORT_PROBE!r}` printed:\n{said}")
    version, location = run([python, "-c", WHERE_PROBE], cwd=home).split()
    if not Path(location).is_relative_to(home):
        sys.exit(f"agentmesh was imported from {location}, not from the fresh venv {home}")
    print(f"{DISTRIBUTION} {version} imports silently from {location}")


def main() -> None:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="agentmesh-wheel-check-") as tmp:
        work = Path(tmp)
        wheel = build_wheel(work / "dist")
        # cwd is the venv, never the checkout: there `import agentmesh` would find the source.
        python = install_fresh(wheel, work / "venv")
        check_import(python, work / "venv")
    print(f"wheel check passed in {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
