"""A key file that is not there is made with a new key (a first start: ``make run``, a new
deployment's volume) and said in the log: at a deployment whose key file's mount went
missing, the new key opens none of the snapshots and shoes the other handlers sealed, and
the partitions this handler takes then stay out of service (an operator's fault drill)."""

from __future__ import annotations

from pathlib import Path

from structlog.testing import capture_logs

from blackjack.command_handler.keys import load_shoe_keys


def test_a_key_file_made_at_start_is_logged_with_its_path(tmp_path: Path) -> None:
    file = tmp_path / "keys" / "shoe.key"
    with capture_logs() as made:
        key = load_shoe_keys({"BLACKJACK_SHOE_KEY_FILE": str(file)}).current
    assert file.read_text().strip() == key and len(key) == 64
    [warning] = made
    assert warning["log_level"] == "warning" and warning["file"] == str(file)
    assert warning["event"] == "shoe key file not there: a new key was made"
    with capture_logs() as read:  # the next start reads it, and says nothing
        assert load_shoe_keys({"BLACKJACK_SHOE_KEY_FILE": str(file)}).current == key
    assert read == []
