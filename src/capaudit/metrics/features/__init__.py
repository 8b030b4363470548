"""LOTUS-style evaluation (Hirota et al. 2025): per-caption measurements and the leaderboard.

The per-caption computations live here, one module each, as plain functions of
caption text (and, for CLIP, images): :mod:`.nsfw` (LDNOOBW word/phrase hits),
:mod:`.parse` (spaCy, batched and cached: content words, dependency depth, scene
graph), :mod:`.scene_graph` (the rule-based scene-graph parser), :mod:`.coverage`
(noun/verb recall and precision against reference captions), :mod:`.clip`
(CLIPScore, long-text windows, retrieval ranks), :mod:`.people` (gender- and
skin-tone-word mentions). The metrics registered in
:mod:`capaudit.metrics` read them; :mod:`.leaderboard`, :mod:`.profiles`
and :mod:`.page` turn metric results into the N-avg leaderboard and its HTML page.
"""
