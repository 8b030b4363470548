"""A scripted judge for the loopback server: deterministic answers derived from the prompt.

Rules (so expected numbers can be derived by hand):
* a sentence / statement / fact is false iff it contains a word of ``FALSE_WORDS``;
* a description's units are its content words (length > 3, not in ``STOP``), type
  ``object``; a word in ``IRRELEVANT`` makes an irrelevant unit;
* two units match iff they are the same word;
* CAPability: COR if the element is a substring of the caption, INC if the element's
  first word is but the element is not, else MISS;
* CapScore: Jaccard of the word sets, for both numbers.
P(yes) is sent as log-probabilities: 0.9 for a yes answer, 0.2 for a no.
"""

from __future__ import annotations

import json
import math
import re

FALSE_WORDS = {"unicorn", "surfboard", "purple"}
IRRELEVANT = {"beautiful", "lovely"}
STOP = {"with", "that", "this", "there", "their", "from", "into", "onto", "over", "near",
        "some", "while", "next", "each", "other", "very", "they", "them"}


def _field(text: str, name: str) -> str:
    m = re.search(name + r": <<(.*?)>>", text, re.S)
    return m.group(1) if m else ""


def words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z]+", text.lower()) if len(w) > 3 and w not in STOP]


def _yes_no(ok: bool, critique: str = "") -> dict:
    lp = [{"token": "yes" if ok else "no", "logprob": math.log(0.9 if ok else 0.8),
           "top_logprobs": [{"token": "yes", "logprob": math.log(0.9 if ok else 0.2)},
                            {"token": "no", "logprob": math.log(0.1 if ok else 0.8)}]}]
    return {"content": ("yes\n" if ok else f"no\n{critique}"), "logprobs": lp}


def prompt_text(body: dict) -> str:
    content = body["messages"][-1]["content"]
    return content if isinstance(content, str) else "\n".join(
        p["text"] for p in content if p["type"] == "text")


def scripted_answer(body: dict):
    text = prompt_text(body)
    if "Sentence: <<" in text and "Earlier sentences" in text:
        bad = [w for w in FALSE_WORDS if w in _field(text, "Sentence").lower()]
        return _yes_no(not bad, f"there is no {bad[0]}" if bad else "")
    if "Statement: <<" in text:
        bad = [w for w in FALSE_WORDS if w in _field(text, "Statement").lower()]
        return _yes_no(not bad, "not in the image")
    if "primitive information units" in text or "atomic facts" in text:
        src = _field(text, "Description") or _field(text, "Sentence")
        units = [{"text": w, "type": "object", "relevant": w not in IRRELEVANT}
                 for w in dict.fromkeys(words(src))]
        return json.dumps({"units": units})
    if "Two lists of information units" in text:
        a = re.findall(r"^(\d+)\. (.*)$", text.split("List B:")[0], re.M)
        b = re.findall(r"^(\d+)\. (.*)$", text.split("List B:")[1], re.M)
        return json.dumps({"matches": [[int(i), int(j)] for i, x in a for j, y in b if x == y]})
    if "Annotated element" in text:
        el, cap = _field(text, r"Annotated element \(ground truth\)"), _field(text, "Description")
        if el.lower() in cap.lower():
            return "COR"
        return "INC" if el.split()[0].lower() in cap.lower() else "MISS"
    if "Candidate: <<" in text:
        a, b = set(words(_field(text, "Reference"))), set(words(_field(text, "Candidate")))
        j = len(a & b) / len(a | b) if a | b else 0.0
        return json.dumps({"semantic": round(j, 6), "overall": round(j, 6)})
    return "I do not know this prompt"
