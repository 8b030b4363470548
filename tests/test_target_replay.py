"""A caption file target is parsed once when small (coverage pass, then the audit replays
its batches, once, letting each go) and re-read when over the budget, with the same rows
either way."""

import json

from capaudit.io import targets
from capaudit.audit.annotation_coverage import target_images


def _file(tmp_path, n=50):
    path = tmp_path / "caps.jsonl"
    path.write_text("".join(json.dumps({"image_id": i % 7 + 1, "caption": f"a dog number {i}"}) + "\n"
                            for i in range(n)))
    return path


def _count_reads(t, monkeypatch):
    calls = []
    reader = t.batches.reader
    orig = reader.read

    def read(path):
        calls.append(path)
        return orig(path)
    monkeypatch.setattr(reader, "read", read)
    return calls


def test_small_file_is_parsed_once(tmp_path, monkeypatch):
    t = targets.resolve_target(None, str(_file(tmp_path)))
    calls = _count_reads(t, monkeypatch)
    images = target_images(None, t)
    rows = list(t.rows())
    assert len(calls) == 1
    assert sorted(iid for _, iid, _ in images) == list(range(1, 8))
    assert rows == [(i % 7 + 1, f"a dog number {i}") for i in range(50)]
    # replayed once and let go: nothing held through the rest of the audit; a third pass
    # reads the file again, with the same rows
    assert t.batches.held is None
    assert list(t.rows()) == rows and len(calls) == 2


def test_file_over_the_budget_is_read_again(tmp_path, monkeypatch):
    monkeypatch.setattr(targets, "REPLAY_BYTES", 10)
    t = targets.resolve_target(None, str(_file(tmp_path)))
    calls = _count_reads(t, monkeypatch)
    target_images(None, t)
    rows = list(t.rows())
    assert len(calls) == 2 and t.batches.held is None
    assert rows == [(i % 7 + 1, f"a dog number {i}") for i in range(50)]


def test_abandoned_pass_holds_nothing(tmp_path, monkeypatch):
    t = targets.resolve_target(None, str(_file(tmp_path)))
    calls = _count_reads(t, monkeypatch)
    next(iter(t.rows()))  # stopped after the first row: an incomplete pass is not replayed
    assert t.batches.held is None
    assert len(list(t.rows())) == 50 and len(calls) == 2
