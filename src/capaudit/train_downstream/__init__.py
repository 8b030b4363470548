"""Downstream experiment: fine-tune a BLIP captioner on a caption set, caption held-out
images, and compare the model's audit with its training captions' audit (amplification).

Modules: :mod:`data` (shard images joined to a set's captions), :mod:`train`
(AdamW fine-tuning with atomic, resumable checkpoints), :mod:`trainer` (its loop and
gradient accumulation), :mod:`runtime` (precision, attention, compile, workers per
device), :mod:`optim` (AdamW, fp32 masters of bf16 weights), :mod:`attention` (BLIP
attention through SDPA), :mod:`captioner` (the model loaded, its device and precision),
:mod:`caption` (batched generation registered as a caption set), :mod:`tiny` (random
BLIPs, tiny to base size, for tests and benchmarks).
The amplification itself (downstream minus upstream with intervals) is pure numpy
and lives in :mod:`capaudit.audit.amplification`. Nothing heavy is imported here: torch and transformers load inside the functions.
"""
