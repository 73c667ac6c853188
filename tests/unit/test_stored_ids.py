"""The read model's stored form of an id (``store.as_stored``) is one to one: two ids that
differ are two keys, whatever NUL, U+FFFD or mark they hold, and none holds a NUL
(PostgreSQL's text cannot)."""

from __future__ import annotations

from itertools import product

from blackjack.projections.store import ESCAPE_MARK, NUL_STORED_AS, as_stored, stored_texts

ALPHABET = ("a", "\x00", NUL_STORED_AS, ESCAPE_MARK)


def test_every_id_of_up_to_seven_characters_has_a_stored_form_of_its_own() -> None:
    ids = ["".join(chars) for n in range(8) for chars in product(ALPHABET, repeat=n)]
    stored = {as_stored(i) for i in ids}
    assert len(stored) == len(ids) == 21_845
    assert not any("\x00" in s for s in stored)


def test_the_ids_the_commands_take_and_a_nul_s_are_stored_as_before() -> None:
    for plain in ("alice", "ünïcødé-玩家-🂡", "p" * 127 + "é", ""):
        assert as_stored(plain) == plain
    assert as_stored("al\x00ice") == "al\ufffdice"  # as the rows folded before hold it
    assert as_stored("al\ufffdice") == "al\ufffd\x01ice"
    assert as_stored("al\x00\x01ice") == "al\ufffd\x01\x01ice"
    assert as_stored("al\ufffd\x01ice") == "al\ufffd\x01\x01\x01ice"


def test_an_id_whose_escape_outgrows_its_column_is_stored_as_a_digest() -> None:
    long_ones = ["a" * 100 + "\ufffd" * 28, "a" * 100 + "\ufffd" * 27 + "\x01"]
    stored = [as_stored(i) for i in long_ones]
    assert all(s.startswith("\x01#") and len(s) == 66 for s in stored)
    assert stored[0] != stored[1]
    assert as_stored("a" * 100 + "\ufffd" * 14) == "a" * 100 + "\ufffd\x01" * 14  # 128: fits
    reason = "r" * 150 + "\ufffd"  # longer than an id column as it came: only in a document
    assert as_stored(reason) == reason + "\x01"


def test_documents_are_stored_text_by_text_keys_included() -> None:
    document = {"al\x00ice": ["al\ufffdice", 3, None], "n": {"k": "\x01"}}
    assert stored_texts(document) == {
        "al\ufffdice": ["al\ufffd\x01ice", 3, None],
        "n": {"k": "\x01\x01"},
    }
