"""The wheel carries the page: the top-level web/ folder ships as the resource package rlhf.web."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from rlhf.server.app import PAGE_FILES, web_dir

ROOT = Path(__file__).resolve().parents[1]


def test_page_files_are_found_through_the_servers_lookup() -> None:
    folder = web_dir()
    for name in PAGE_FILES:
        assert (folder / name).is_file(), name
    assert "Which one looks more like" in (folder / "index.html").read_text()


def test_every_package_under_rlhf_is_listed_for_the_wheel() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    on_disk = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "rlhf").rglob("__init__.py")
    }
    assert set(setuptools["packages"]) == on_disk | {"rlhf.web"}
    assert setuptools["package-dir"] == {"rlhf.web": "web"}


@pytest.mark.slow
def test_a_wheel_built_from_a_clean_copy_serves_the_page(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for name in ("rlhf", "web"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    wheels = tmp_path / "wheels"
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(src)],
        check=True,
        cwd=tmp_path,
    )
    [wheel] = wheels.glob("rlhf-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for name in PAGE_FILES:
        assert f"rlhf/web/{name}" in names
    assert "rlhf/web/__init__.py" not in names

    target = tmp_path / "site"
    subprocess.run([*pip, "install", "--no-deps", "--target", str(target), str(wheel)], check=True)
    shutil.rmtree(src)  # the installed copy must not lean on the checkout it was built from
    probe = (
        "import rlhf, rlhf.server.app as app; from rlhf.store import LabelStore; "
        "print(rlhf.__file__); print(app.web_dir()); "
        "page = app.create_app(LabelStore('labels.sqlite'), '.').test_client().get('/'); "
        "print(page.status_code, b'Which one looks more like' in page.data)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,  # not the checkout, whose rlhf/ would shadow the installed one
        env={**os.environ, "PYTHONPATH": str(target)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    assert out[0] == str(target / "rlhf" / "__init__.py")
    assert out[1] == str(target / "rlhf" / "web")
    assert out[2] == "200 True"
