"""The memory limit the memory alert compares a process's resident memory with: the
container's cgroup limit, none when the cgroup says unlimited (no series, no alert)."""

from __future__ import annotations

from pathlib import Path

from blackjack.observability.roles import memory_limit


def limits(tmp_path: Path, v2: str | None, v1: str | None) -> dict[str, Path]:
    """The two files in a directory of their own (absent where the text is None)."""
    root = tmp_path / f"{v2}-{v1}"
    root.mkdir()
    files = {"cgroup2": root / "memory.max", "cgroup1": root / "limit_in_bytes"}
    for file, text in zip(files.values(), (v2, v1), strict=True):
        if text is not None:
            file.write_text(text + "\n")
    return files


def test_the_cgroup_v2_limit_is_read_and_max_means_none(tmp_path: Path) -> None:
    assert memory_limit(limits(tmp_path, "1073741824", None)) == ("cgroup2", 1073741824)
    assert memory_limit(limits(tmp_path, "max", "536870912")) is None


def test_cgroup_v1_is_read_when_v2_is_absent_and_its_huge_number_means_none(
    tmp_path: Path,
) -> None:
    assert memory_limit(limits(tmp_path, None, "536870912")) == ("cgroup1", 536870912)
    assert memory_limit(limits(tmp_path, None, "9223372036854771712")) is None
    assert memory_limit(limits(tmp_path, None, None)) is None
