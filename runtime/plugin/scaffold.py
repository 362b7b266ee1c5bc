"""``switchboard package new|install|list``: made by a helper; see its brief."""

from __future__ import annotations

from pathlib import Path


class PackageError(Exception):
    """A package cannot be made or installed; the text says why and where."""


def new_package(name: str, lang: str, where: Path) -> Path:
    raise PackageError("not written yet")


def next_steps(folder: Path, lang: str) -> list[str]:
    return []


def install(path: Path, *, force: bool = False) -> Path:
    raise PackageError("not written yet")


def list_packages() -> list[str]:
    return []
